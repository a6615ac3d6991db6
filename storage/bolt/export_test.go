package bolt

// Stats reports how many Update functions ran and how many transactions
// committed them, for tests and benchmarks of the group commit.
func Stats(s *Store) (calls, commits int64) { return s.calls.Load(), s.commits.Load() }
