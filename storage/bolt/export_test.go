package bolt

import bbolt "go.etcd.io/bbolt"

// Stats reports how many Update functions ran and how many transactions
// committed them, for tests and benchmarks of the group commit.
func Stats(s *Store) (calls, commits int64) { return s.calls.Load(), s.commits.Load() }

// FailCommitsAfter makes each later commit of s report err after it was
// made: what bbolt answers when the sync after the meta page fails.
func FailCommitsAfter(s *Store, err error) {
	s.update = func(fn func(*bbolt.Tx) error) error {
		if uerr := s.db.Update(fn); uerr != nil {
			return uerr
		}
		return err
	}
}

// OutboxSkips reports how many merchants the claims' skip scan of
// outboxmdue has visited.
func OutboxSkips(s *Store) int64 { return s.outboxSkips.Load() }
