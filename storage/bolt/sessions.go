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
	ok, err := t.getJSON(bSessions, key(merchantID, id), &s)
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
		if old.ExternalSessionID != "" && old.ExternalSessionID != s.ExternalSessionID {
			if err := t.del(bSessionIx, sessionLookupKey(s.MerchantID, 'x', old.ExternalSessionID)); err != nil {
				return err
			}
		}
		if !old.CreatedAt.Equal(s.CreatedAt) {
			return fault.Internalf(nil, "a session's creation time cannot change")
		}
	}
	return t.putJSON(bSessions, key(s.MerchantID, s.ID), s)
}

// ListSessions walks the merchant's sessions newest first from fromId and
// checks the filters on each; sessions are short-lived records, so the
// creation index bounded by the page is the access path.
func (t *tx) ListSessions(merchantID string, q session.Query) ([]*session.Session, string, error) {
	if err := t.check(false); err != nil {
		return nil, "", err
	}
	prefix := append(lp(nil, merchantID), 'c')
	c := t.st.bucket(bSessionIx).Cursor()
	var k []byte
	if q.FromID != "" {
		from, err := t.GetSession(merchantID, q.FromID)
		if err != nil {
			return nil, "", err
		}
		k, _ = c.Seek(sessionCreatedKey(from))
		k, _ = c.Prev()
	} else if next := successor(prefix); next != nil {
		if k, _ = c.Seek(next); k != nil {
			k, _ = c.Prev()
		} else {
			k, _ = c.Last()
		}
	}
	now := t.st.now
	var page []*session.Session
	for ; k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Prev() {
		id := string(k[len(prefix)+timeLen:])
		s, err := t.GetSession(merchantID, id)
		if err != nil {
			return nil, "", err
		}
		if !q.Match(s, now) {
			continue
		}
		if len(page) == q.Size {
			return page, page[len(page)-1].ID, nil
		}
		page = append(page, s)
	}
	return page, "", nil
}
