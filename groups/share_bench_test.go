package groups_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkShareGroupOfThree is issue 25's goal measurement: a share
// group of 3 kgo members consumes at no less than half the rate it
// reaches against kfake in the same run. Both clusters hold the same
// records (a topic of 6 partitions); each iteration times a new group of
// 3 members (share.auto.offset.reset=earliest, kgo's defaults: records
// accepted at the next poll) from their start until they have consumed
// every record, against txncoord (`txncoord up` embedded: a coordinator
// and two leaders) and then kfake (3 brokers). It reports both rates and
// their ratio (never asserted):
//
//	go test ./groups/ -run '^$' -bench ShareGroupOfThree -benchtime 3x
func BenchmarkShareGroupOfThree(b *testing.B) {
	const topic, partitions, records = "in", 6, 30000
	tc := startBenchCluster(b, topic, partitions)
	kf, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(partitions, topic))
	if err != nil {
		b.Fatal(err)
	}
	defer kf.Close()
	targets := []struct {
		name  string
		seeds []string
		total time.Duration
	}{{name: "txncoord", seeds: []string{tc}}, {name: "kfake", seeds: kf.ListenAddrs()}}
	for _, t := range targets {
		if err := produceTo(t.seeds, topic, records); err != nil {
			b.Fatalf("%s: %v", t.name, err)
		}
	}
	for i := 0; i < b.N; i++ {
		for j := range targets {
			d, err := timeShareConsume(targets[j].seeds, fmt.Sprintf("share-bench-%d", i), topic, records)
			if err != nil {
				b.Fatalf("%s: %v", targets[j].name, err)
			}
			targets[j].total += d
		}
	}
	tx := float64(records*b.N) / targets[0].total.Seconds()
	kr := float64(records*b.N) / targets[1].total.Seconds()
	b.ReportMetric(tx, "txncoord-rec/s")
	b.ReportMetric(kr, "kfake-rec/s")
	b.ReportMetric(tx/kr, "ratio")
}

func produceTo(seeds []string, topic string, n int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var first atomic.Pointer[error]
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%d", i)}, func(_ *kgo.Record, err error) {
			if err != nil {
				first.CompareAndSwap(nil, &err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	if p := first.Load(); p != nil {
		return *p
	}
	return nil
}

// timeShareConsume times 3 share members of a new group consuming n
// records.
func timeShareConsume(seeds []string, group, topic string, n int) (time.Duration, error) {
	admin, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return 0, err
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "share.auto.offset.reset", kmsg.StringPtr("earliest")
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, admin)
	if err != nil {
		return 0, err
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		return 0, err
	}
	var total atomic.Int64
	pollCtx, done := context.WithCancel(ctx)
	defer done()
	start := time.Now()
	var wg sync.WaitGroup
	for range 3 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
		if err != nil {
			return 0, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			for pollCtx.Err() == nil {
				if total.Add(int64(cl.PollFetches(pollCtx).NumRecords())) >= int64(n) {
					done()
				}
			}
		}()
	}
	<-pollCtx.Done()
	elapsed := time.Since(start)
	wg.Wait()
	if total.Load() < int64(n) {
		return 0, fmt.Errorf("consumed %d of %d records", total.Load(), n)
	}
	return elapsed, nil
}
