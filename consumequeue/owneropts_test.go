package consumequeue

// benchOwnerOptions sets the options of an owner that syncs the whole file
// system (the store's), for the benchmarks that model it.
func benchOwnerOptions(o Options) Options {
	o.OwnerSyncsFS = true
	return o
}

// benchWriteBuffered is Set.WriteBuffered.
func benchWriteBuffered(set *Set) error { return set.WriteBuffered() }
