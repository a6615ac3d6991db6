package bolt

import (
	"bytes"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/session"
)

// Session index entries, all under the merchant's prefix:
//
//	'c' time(createdAt) id → empty   newest-first listing
//	'x' lp(externalId)     → id      lookup by external id
//	'o' lp(orderId)        → id      lookup by order id
func sessionCreatedKey(s *session.Session) []byte {
	b := append(lp(nil, s.MerchantID), 'c')
	b = putTime(b, s.CreatedAt)
	return append(b, s.ID...)
}

func sessionLookupKey(merchantID string, kind byte, v string) []byte {
	return lp(append(lp(nil, merchantID), kind), v)
}

func (t *tx) GetSession(merchantID, id string) (*session.Session, error) {
	if err := t.check(false); err != nil {
		return nil, err
	}
	var s session.Session
	ok, err := t.getRecord(bSessions, key(merchantID, id), &s)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fault.NotFoundf("session_not_found", "session %s not found", id)
	}
	return &s, nil
}

func (t *tx) sessionBy(merchantID string, kind byte, v string) (*session.Session, error) {
	if err := t.check(false); err != nil {
		return nil, err
	}
	id := t.get(bSessionIx, sessionLookupKey(merchantID, kind, v))
	if id == nil {
		return nil, fault.NotFoundf("session_not_found", "session not found")
	}
	return t.GetSession(merchantID, string(id))
}

func (t *tx) GetSessionByExternalID(merchantID, externalID string) (*session.Session, error) {
	return t.sessionBy(merchantID, 'x', externalID)
}

func (t *tx) GetSessionByOrderID(merchantID, orderID string) (*session.Session, error) {
	return t.sessionBy(merchantID, 'o', orderID)
}

func (t *tx) PutSession(s *session.Session) error {
	if err := t.check(true); err != nil {
		return err
	}
	old, err := t.GetSession(s.MerchantID, s.ID)
	if err != nil && !fault.Is(err, fault.NotFound) {
		return err
	}
	for kind, v := range map[byte]string{'x': s.ExternalSessionID, 'o': s.OrderID} {
		if v == "" {
			continue
		}
		k := sessionLookupKey(s.MerchantID, kind, v)
		if owner := t.get(bSessionIx, k); owner != nil && string(owner) != s.ID {
			return fault.Conflictf("session_exists", "another session has that %s", map[byte]string{'x': "externalSessionId", 'o': "orderId"}[kind])
		}
		if err := t.put(bSessionIx, k, []byte(s.ID)); err != nil {
			return err
		}
	}
	if old == nil {
		if err := t.put(bSessionIx, sessionCreatedKey(s), present); err != nil {
			return err
		}
	} else {
		for kind, v := range map[byte][2]string{'x': {old.ExternalSessionID, s.ExternalSessionID}, 'o': {old.OrderID, s.OrderID}} {
			if v[0] != "" && v[0] != v[1] {
				if err := t.del(bSessionIx, sessionLookupKey(s.MerchantID, kind, v[0])); err != nil {
					return err
				}
			}
		}
		if !old.CreatedAt.Equal(s.CreatedAt) {
			return fault.Internalf(nil, "a session's creation time cannot change")
		}
	}
	return t.putRecord(bSessions, key(s.MerchantID, s.ID), s)
}

// ListSessions walks the merchant's sessions newest first from fromId and
// checks the filters on each; sessions are short-lived records, so the
// creation index bounded by the page is the access path.
func (t *tx) ListSessions(merchantID string, q session.Query) ([]*session.Session, string, error) {
	if err := t.check(false); err != nil {
		return nil, "", err
	}
	var from []byte
	if q.FromID != "" {
		s, err := t.GetSession(merchantID, q.FromID)
		if err != nil {
			return nil, "", err
		}
		from = sessionCreatedKey(s)
	}
	now := t.st.now
	return pageNewest(t, bSessionIx, append(lp(nil, merchantID), 'c'), from, q.Size,
		func(id string) (*session.Session, error) { return t.GetSession(merchantID, id) },
		func(s *session.Session) bool { return q.Match(s, now) },
		func(s *session.Session) string { return s.ID })
}

// pageNewest returns up to size records of a creation index (keys: prefix,
// time, id), newest first, starting strictly before the key from (at the
// newest when nil), keeping those match accepts, and the id to continue
// from ("" on the last page).
func pageNewest[T any](t *tx, bucket, prefix, from []byte, size int, load func(id string) (T, error),
	match func(T) bool, idOf func(T) string) ([]T, string, error) {
	c := t.st.bucket(bucket).Cursor()
	var k []byte
	switch next := successor(prefix); {
	case from != nil:
		c.Seek(from)
		k, _ = c.Prev()
	case next != nil:
		if k, _ = c.Seek(next); k != nil {
			k, _ = c.Prev()
		} else {
			k, _ = c.Last()
		}
	}
	var page []T
	for ; k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Prev() {
		r, err := load(string(k[len(prefix)+timeLen:]))
		if err != nil {
			return nil, "", err
		}
		if !match(r) {
			continue
		}
		if len(page) == size {
			return page, idOf(page[len(page)-1]), nil
		}
		page = append(page, r)
	}
	return page, "", nil
}
