package server

import (
	"errors"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/fault"
)

// notificationRoutes: the merchant's webhook settings and delivery log.
// Settings live at /v1/notification-settings because httprouter cannot have
// a fixed segment beside /v1/notifications/:notificationId.
func (s *Server) notificationRoutes() {
	s.handleAuthed(http.MethodGet, "/v1/notification-settings", func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
		set, err := s.ledger.Webhook(r.Context(), merchantOf(r.Context()))
		s.answer(w, r, http.StatusOK, set, err)
	})
	s.handleAuthed(http.MethodPut, "/v1/notification-settings", func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
		var req kassa.SetWebhookRequest
		if err := s.decodeBody(w, r, &req, false); err != nil {
			s.writeError(w, r, err)
			return
		}
		set, err := s.ledger.SetWebhook(r.Context(), merchantOf(r.Context()), req)
		s.answer(w, r, http.StatusOK, set, err)
	})
	s.handleAuthed(http.MethodDelete, "/v1/notification-settings", func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
		if err := s.ledger.DeleteWebhook(r.Context(), merchantOf(r.Context())); err != nil {
			s.writeError(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	s.handleAuthed(http.MethodGet, "/v1/notifications", func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
		v := r.URL.Query()
		var f fault.Fields
		size := kassa.DefaultNotificationPage
		if v.Has("size") {
			size = parseIntParam(&f, "size", queryValue(&f, v, "size"), 1, kassa.MaxNotificationPage)
		}
		fromID := queryValue(&f, v, "fromId")
		if err := f.Err(); err != nil {
			s.writeError(w, r, err)
			return
		}
		page, err := s.ledger.ListNotifications(r.Context(), merchantOf(r.Context()), fromID, size)
		s.answer(w, r, http.StatusOK, page, err)
	})
	s.handleAuthed(http.MethodGet, "/v1/notifications/:notificationId", func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
		n, err := s.ledger.GetNotification(r.Context(), merchantOf(r.Context()), p.ByName("notificationId"))
		s.answer(w, r, http.StatusOK, n, err)
	})
	s.handleAuthed(http.MethodPost, "/v1/notifications/:notificationId/redeliver", func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
		n, err := s.ledger.RedeliverNotification(r.Context(), merchantOf(r.Context()), p.ByName("notificationId"))
		s.answer(w, r, http.StatusOK, n, err)
	})
}

// answer writes v with status, or the problem for err.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, status int, v any, err error) {
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, status, v)
}

// sandboxDeliverRounds and sandboxDeliverFor bound one call of the sandbox
// delivery job: rounds of one batch each, while a round claims a full batch
// (50 a round, so up to 1 000 notifications, like the 1 000 tasks of the
// tasks job), and no new round once the call has run for sandboxDeliverFor,
// well inside the server's 60 s write timeout (a POST may take 10 s).
const (
	sandboxDeliverRounds = 20
	sandboxDeliverFor    = 30 * time.Second
)

func (s *Server) sandboxDeliver(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	ctx := jobContext(r)
	var total kassa.DeliveryStats
	start := time.Now()
	for round := range sandboxDeliverRounds {
		if round > 0 && (time.Since(start) > sandboxDeliverFor || ctx.Err() != nil) {
			break
		}
		stats, err := s.ledger.DeliverNotifications(ctx, s.cfg.Delivery)
		if err != nil && round == 0 {
			s.writeError(w, r, err)
			return
		}
		if err != nil {
			// What earlier rounds delivered is recorded; say so rather
			// than lose it. The next call or the background run goes on.
			s.log.WarnContext(ctx, "sandbox delivery round", "err", err)
			break
		}
		total.Add(stats)
		if !stats.More {
			break
		}
	}
	writeJSON(w, http.StatusOK, total)
}

func (s *Server) sandboxTasks(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	stats, err := s.ledger.RunTasks(jobContext(r), 1000)
	// The answer counts the tasks set aside (failed).
	s.answer(w, r, http.StatusOK, stats, s.logSetAside(err))
}

// logSetAside logs the tasks a sandbox job's run set aside, and passes on
// any other error: tasks that failed were set aside and the run went on,
// so what it did is the job's answer, and the log says why they failed, as
// the periodic job does.
func (s *Server) logSetAside(err error) error {
	if aside := (*kassa.TasksSetAside)(nil); errors.As(err, &aside) {
		s.log.Error("scheduled tasks", "err", err)
		return nil
	}
	return err
}
