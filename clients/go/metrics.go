package queuebox

/*
#include "queuebox.h"
*/
import "C"

import "net/http"

// MetricsContentType is the Content-Type of Metrics: the Prometheus text format 0.0.4.
const MetricsContentType = "text/plain; version=0.0.4; charset=utf-8"

// Metrics returns the worker's metrics in the Prometheus text format: rows claimed,
// completed, retried, dead and released, claims lost, claim errors, lease renewals, and the
// claim and handler durations as histograms, each labelled by source. The native library
// keeps and encodes them; this only passes the text on. Empty once the worker is closed.
func (w *Worker) Metrics() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ""
	}
	var text *C.char
	var e *C.QbError
	if check(C.qb_worker_metrics_text(w.w, &text, &e), e) != nil {
		return ""
	}
	return takeString(text)
}

// MetricsHandler serves Metrics for a Prometheus scrape: mount it in the application's own
// server, e.g. mux.Handle("/metrics", w.MetricsHandler()).
func (w *Worker) MetricsHandler() http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", MetricsContentType)
		_, _ = rw.Write([]byte(w.Metrics()))
	})
}
