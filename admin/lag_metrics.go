package admin

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// lagCollector exports each consumer group's lag per partition, as
// kafka-consumer-groups.sh --describe computes it (the partition's log end
// offset at its leader minus the group's committed offset), at every
// scrape: the groups backend asks the leaders then (ListOffsets).
type lagCollector struct{ backend func() Backend }

// lagScrapeTimeout bounds one scrape's questions to the leaders.
const lagScrapeTimeout = 5 * time.Second

var descGroupLag = prometheus.NewDesc("txncoord_consumer_group_lag",
	"A consumer group's lag on a partition: the log end offset minus the committed offset (partitions with a committed offset and a known end).",
	[]string{"group", "topic", "partition"}, nil)

// LagCollector is the collector of txncoord_consumer_group_lag over b's
// groups; nil when b serves no groups.
func LagCollector(b Backend) prometheus.Collector {
	if _, ok := b.(GroupsBackend); !ok {
		return nil
	}
	return lagCollector{func() Backend { return b }}
}

// LagCollectorOf is LagCollector over the backend current returns at each
// scrape (a node restarted serves a new one; nil or one without groups:
// no series).
func LagCollectorOf(current func() Backend) prometheus.Collector {
	return lagCollector{current}
}

func (c lagCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descGroupLag }

func (c lagCollector) Collect(ch chan<- prometheus.Metric) {
	gb, ok := c.backend().(GroupsBackend)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), lagScrapeTimeout)
	defer cancel()
	groups, err := gb.Groups(ctx)
	if err != nil {
		return
	}
	for _, g := range groups {
		d, err := gb.Group(ctx, g.Group)
		if err != nil {
			continue
		}
		for _, o := range d.Offsets {
			if o.CurrentOffset < 0 || o.Lag < 0 {
				continue
			}
			ch <- prometheus.MustNewConstMetric(descGroupLag, prometheus.GaugeValue, float64(o.Lag),
				g.Group, o.Topic, strconv.Itoa(int(o.Partition)))
		}
	}
}
