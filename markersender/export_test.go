package markersender

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// StuckValue and SentValue read the sender's collectors in tests.
func (s *Sender) StuckValue() float64 { return value(s.m.stuck) }

func (s *Sender) SentValue(leader, version string) float64 {
	return value(s.m.sent.WithLabelValues(leader, version))
}

func value(m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		return -1
	}
	if d.Gauge != nil {
		return d.Gauge.GetValue()
	}
	return d.Counter.GetValue()
}
