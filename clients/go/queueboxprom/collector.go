// Package queueboxprom registers a QueueBox worker's metrics in the application's own
// Prometheus registry (github.com/prometheus/client_golang), beside its other collectors:
//
//	w, err := queuebox.NewWorker(ctx, url, queuebox.Options{Source: "orders"})
//	...
//	prometheus.MustRegister(queueboxprom.NewCollector(w))
//
// The native library keeps the counters and histograms (rows claimed, completed, retried,
// dead and released, claims lost, claim errors, lease renewals, claim and handler durations,
// each labelled by source); each scrape reads them through Worker.Metrics and hands them to
// the registry as they are. Several workers (one per source) register side by side: their
// series differ by the source label.
package queueboxprom

import (
	"fmt"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	queuebox "github.com/alternayte/queuebox/clients/go"
)

// Collector is a prometheus.Collector of one worker's metrics. It is an unchecked collector
// (Describe sends nothing): the series appear as the worker records them. A closed worker
// has none.
type Collector struct {
	w *queuebox.Worker
}

// NewCollector returns the collector of w's metrics.
func NewCollector(w *queuebox.Worker) *Collector { return &Collector{w: w} }

// Describe sends nothing: an unchecked collector (see prometheus.Collector).
func (c *Collector) Describe(chan<- *prometheus.Desc) {}

// Collect sends the worker's current metrics.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	text := c.w.Metrics()
	if text == "" {
		return
	}
	families, err := parse(text)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(prometheus.NewDesc("queuebox_metrics_unreadable", "the native library's metrics could not be read", nil, nil), err)
		return
	}
	names := make([]string, 0, len(families))
	for name := range families {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, m := range metrics(families[name]) {
			ch <- m
		}
	}
}

func parse(text string) (map[string]*dto.MetricFamily, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(strings.NewReader(text))
}

// metrics turns one parsed family into const metrics of the same name, help, type, labels
// and values.
func metrics(f *dto.MetricFamily) []prometheus.Metric {
	out := make([]prometheus.Metric, 0, len(f.GetMetric()))
	for _, m := range f.GetMetric() {
		names := make([]string, 0, len(m.GetLabel()))
		values := make([]string, 0, len(m.GetLabel()))
		for _, l := range m.GetLabel() {
			names = append(names, l.GetName())
			values = append(values, l.GetValue())
		}
		desc := prometheus.NewDesc(f.GetName(), f.GetHelp(), names, nil)
		var (
			metric prometheus.Metric
			err    error
		)
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			metric, err = prometheus.NewConstMetric(desc, prometheus.CounterValue, m.GetCounter().GetValue(), values...)
		case dto.MetricType_GAUGE:
			metric, err = prometheus.NewConstMetric(desc, prometheus.GaugeValue, m.GetGauge().GetValue(), values...)
		case dto.MetricType_HISTOGRAM:
			h := m.GetHistogram()
			buckets := make(map[float64]uint64, len(h.GetBucket()))
			for _, b := range h.GetBucket() {
				buckets[b.GetUpperBound()] = b.GetCumulativeCount()
			}
			metric, err = prometheus.NewConstHistogram(desc, h.GetSampleCount(), h.GetSampleSum(), buckets, values...)
		default:
			metric, err = prometheus.NewConstMetric(desc, prometheus.UntypedValue, m.GetUntyped().GetValue(), values...)
		}
		if err != nil {
			metric = prometheus.NewInvalidMetric(desc, fmt.Errorf("queuebox metric %s: %w", f.GetName(), err))
		}
		out = append(out, metric)
	}
	return out
}
