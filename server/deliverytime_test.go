package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/kassahq/kassa/storage"
)

// TestDeliveryTimesAreUTC: a delivery's time is the server's wall clock, and
// time.Now is in the process's local zone (TZ). Every other timestamp the API
// writes is UTC ("Z"), so the delivery log wrote its attempts in the zone
// the server happened to run in: on TZ=Pacific/Kiritimati an attempt at
// 2026-03-28T23:30Z read 2026-03-29T13:30:00+14:00, another calendar day,
// and replicas in two zones wrote one log two ways.
func TestDeliveryTimesAreUTC(t *testing.T) {
	// What time.Now answers in a process on TZ=Pacific/Kiritimati.
	kiritimati := time.FixedZone("+14", 14*60*60)
	wall := time.Date(2026, 3, 28, 23, 30, 0, 0, time.UTC)
	clock := NewClock(true)
	st := openStore(t, clock.Now)
	e := newEnvOn(t, true, clock, st, func(c *Config) {
		c.Delivery.WallClock = func() time.Time { return wall.In(kiritimati) }
	})
	rcv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer rcv.Close()
	if code, _, b := e.req("PUT", "/v1/notification-settings", `{"url":"`+rcv.URL+`","events":["order.*"]}`, e.auth, nil); code != 200 {
		t.Fatalf("settings: %d %v", code, b)
	}
	e.order("5560000001", "invoice")
	if code, _, stats := e.req("POST", "/sandbox/v1/jobs/notifications", "", e.auth, nil); code != 200 || stats["delivered"].(float64) < 1 {
		t.Fatalf("deliver: %d %v", code, stats)
	}
	code, _, page := e.req("GET", "/v1/notifications", "", e.auth, nil)
	list, _ := page["notifications"].([]any)
	if code != 200 || len(list) == 0 {
		t.Fatalf("log: %d %v", code, page)
	}
	for _, n := range list {
		ds := n.(map[string]any)["deliveries"].([]any)
		if len(ds) != 1 {
			t.Fatalf("deliveries %v", ds)
		}
		if got, want := ds[0].(map[string]any)["at"], "2026-03-28T23:30:00Z"; got != want {
			t.Errorf("deliveries[0].at = %v, want %s", got, want)
		}
		// And stored so: what a store holds does not depend on the zone
		// of the process that wrote it.
		id, merchant := n.(map[string]any)["id"].(string), n.(map[string]any)["payload"].(map[string]any)["merchantId"].(string)
		err := st.View(context.Background(), func(tx storage.Tx) error {
			m, err := tx.GetOutbox(merchant, id)
			if err == nil && (len(m.Log) != 1 || m.Log[0].At.Location() != time.UTC || !m.Log[0].At.Equal(wall)) {
				t.Errorf("stored attempts %+v", m.Log)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}

		// An attempt stored before the log was kept in UTC carries the
		// zone the server ran in: it is shown in UTC all the same.
		err = st.Update(context.Background(), func(tx storage.Tx) error {
			m, err := tx.GetOutbox(merchant, id)
			if err != nil {
				return err
			}
			m.Log[0].At = wall.In(kiritimati)
			return tx.UpdateOutbox(m)
		})
		if err != nil {
			t.Fatal(err)
		}
		code, _, one := e.req("GET", "/v1/notifications/"+id, "", e.auth, nil)
		if code != 200 {
			t.Fatalf("notification %s: %d %v", id, code, one)
		}
		if got, want := one["deliveries"].([]any)[0].(map[string]any)["at"], "2026-03-28T23:30:00Z"; got != want {
			t.Errorf("an attempt stored at +14:00: deliveries[0].at = %v, want %s", got, want)
		}
	}
}
