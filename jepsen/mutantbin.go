package jepsen

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/raftmq/raftmq/internal/failpoint"
)

// modulePath is the module whose source tree BuildMutantBinary builds.
const modulePath = "github.com/raftmq/raftmq"

// NeedsMutantBuild reports whether a run with these settings needs brokers
// built with -tags mutant: a mutant, or the clock nemesis, which works
// through the fault endpoint, or the disk-full nemesis where no tmpfs can
// be mounted (its virtual ballast is set through the fault endpoint).
func NeedsMutantBuild(mut string, nemeses []string) bool {
	return mut != "" || slices.Contains(nemeses, NemClock) ||
		(slices.Contains(nemeses, NemDiskFull) && !DiskFullAvailable())
}

// brokerBinary is the executable a run starts as brokers, and whether it
// gets the fault endpoint.
func (o *Options) brokerBinary(ctx context.Context) (bin string, faults bool, err error) {
	if !NeedsMutantBuild(o.Mutant, o.Nemesis) {
		return o.Binary, false, nil
	}
	if o.MutantBinary != "" {
		return o.MutantBinary, true, nil
	}
	bin, err = BuildMutantBinary(ctx, o.Progress)
	return bin, true, err
}

var mutantBuild struct {
	sync.Mutex
	path string // built by this process
}

// BuildMutantBinary builds raftmq with -tags mutant from the source tree
// (go build -tags mutant -o PATH ./cmd/raftmq) and returns PATH, a file
// in the user's cache directory named after the source tree. The source
// tree is the module holding the working directory, else the one this
// harness was compiled from. Go's build cache makes a rebuild of unchanged
// sources take a second or two; one process builds at most once.
func BuildMutantBinary(ctx context.Context, progress io.Writer) (string, error) {
	mutantBuild.Lock()
	defer mutantBuild.Unlock()
	if mutantBuild.path != "" {
		return mutantBuild.path, nil
	}
	if progress == nil {
		progress = io.Discard
	}
	fail := func(err error) (string, error) {
		return "", fmt.Errorf("jepsen: this run needs a raftmq binary built with -tags mutant (for a mutant or the fault endpoint): %w; "+
			"build one with `go build -tags mutant -o raftmq-mutant ./cmd/raftmq` and pass --mutant-binary raftmq-mutant", err)
	}
	src, err := sourceTree()
	if err != nil {
		return fail(err)
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, serr := os.Stat(goTool); serr != nil {
			return fail(errors.New("no go command on PATH"))
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	sum := sha256.Sum256([]byte(src))
	dir := filepath.Join(cache, "raftmq", "mutant-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail(err)
	}
	// Processes building from the same tree take turns.
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fail(err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fail(err)
	}
	out := filepath.Join(dir, "raftmq")
	fmt.Fprintf(progress, "jepsen: building the mutant binary: go build -tags mutant -o %s ./cmd/raftmq (in %s)\n", out, src)
	start := time.Now()
	cmd := exec.CommandContext(ctx, goTool, "build", "-tags", "mutant", "-o", out, "./cmd/raftmq")
	cmd.Dir = src
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fail(fmt.Errorf("go build in %s: %v\n%s", src, err, strings.TrimSpace(stderr.String())))
	}
	fmt.Fprintf(progress, "jepsen: mutant binary ready in %v\n", time.Since(start).Round(100*time.Millisecond))
	mutantBuild.path = out
	return out, nil
}

// sourceTree finds the raftmq module's directory: the module holding the
// working directory, else the one this file was compiled from.
func sourceTree() (string, error) {
	var tried []string
	if wd, err := os.Getwd(); err == nil {
		if dir, ok := moduleRoot(wd); ok {
			return dir, nil
		}
		tried = append(tried, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		if dir, ok := moduleRoot(filepath.Dir(file)); ok {
			return dir, nil
		}
		tried = append(tried, filepath.Dir(file))
	}
	return "", fmt.Errorf("no %s source tree found (looked above %s)", modulePath, strings.Join(tried, " and "))
}

// moduleRoot walks up from dir to the directory whose go.mod declares
// modulePath.
func moduleRoot(dir string) (string, bool) {
	for {
		if f, err := os.Open(filepath.Join(dir, "go.mod")); err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if fields := strings.Fields(sc.Text()); len(fields) == 2 && fields[0] == "module" {
					f.Close()
					return dir, strings.Trim(fields[1], `"`) == modulePath
				}
			}
			f.Close()
			return "", false
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// mutantSelf is this process's executable when it was built with -tags
// mutant ("" otherwise).
func mutantSelf() string {
	if !failpoint.Built {
		return ""
	}
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	return exe
}
