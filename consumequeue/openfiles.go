package consumequeue

import "syscall"

// MaxDerivedOpenFiles caps what OpenFilesForProcess returns: past it, a
// queue written less than once per checkpoint reopens its file, which
// costs less than keeping every file of a very large Set open.
const MaxDerivedOpenFiles = 16384

// OpenFilesForProcess returns a MaxOpenFiles for a Set that shares the
// process with the owner's connections and log segments: half of the
// process's descriptor limit (RLIMIT_NOFILE's soft limit, which Go raises
// to the hard limit at start-up), at least DefaultMaxOpenFiles and at most
// MaxDerivedOpenFiles. With a limit of 20,000 it is 10,000, so 8,192
// queues written round robin keep their files open instead of reopening
// and mapping one on almost every write (each miss costs an open, a
// mapping and closing another file). Each open file also holds one
// mapping, well below Linux's default vm.max_map_count of 65,530.
func OpenFilesForProcess() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return DefaultMaxOpenFiles
	}
	return openFilesForLimit(lim.Cur)
}

func openFilesForLimit(nofile uint64) int {
	n := nofile / 2
	switch {
	case n < DefaultMaxOpenFiles:
		return DefaultMaxOpenFiles
	case n > MaxDerivedOpenFiles:
		return MaxDerivedOpenFiles
	}
	return int(n)
}
