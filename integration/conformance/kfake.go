package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kfakeBrokers is how many brokers the control cluster has: kfake's main.go,
// which franz-go's CI starts before its integration tests, listens on three.
const kfakeBrokers = 3

// serveKfake is the child `conformance serve-kfake --port P`: a kfake
// cluster on 127.0.0.1:P..P+2, set up as franz-go's CI runs it against the
// same tests (kfake's main.go: seed topic "foo", KIP-848 heartbeat interval
// 1 s), until SIGTERM or SIGINT. It prints "kfake ready bootstrap=..." once
// every broker listens.
func serveKfake(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve-kfake", flag.ContinueOnError)
	fs.SetOutput(stderr)
	port := fs.Int("port", 0, "first port; the brokers listen on port..port+2")
	apisFile := fs.String("apis", "", "on exit, write the API keys the cluster was asked for here (see apis.go)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *port <= 0 {
		fmt.Fprintln(stderr, "serve-kfake: --port is required")
		return 2
	}
	ports := make([]int, kfakeBrokers)
	for i := range ports {
		ports[i] = *port + i
	}
	c, err := kfake.NewCluster(
		kfake.Ports(ports...),
		kfake.SeedTopics(-1, "foo"),
		kfake.BrokerConfigs(map[string]string{"group.consumer.heartbeat.interval.ms": "1000"}),
	)
	if err != nil {
		fmt.Fprintln(stderr, "serve-kfake:", err)
		return 1
	}
	defer c.Close()
	var seen apiSet
	if *apisFile != "" {
		seen = apiSet{}
		var mu sync.Mutex
		// Observe only: not handling the request keeps the function and
		// lets kfake answer as usual.
		c.Control(func(req kmsg.Request) (kmsg.Response, error, bool) {
			mu.Lock()
			seen.add(req.Key(), req.GetVersion())
			mu.Unlock()
			return nil, nil, false
		})
		defer func() {
			c.Close() // no request is observed after this
			mu.Lock()
			defer mu.Unlock()
			if err := seen.write(*apisFile); err != nil {
				fmt.Fprintln(stderr, "serve-kfake:", err)
			}
		}()
	}
	fmt.Fprintf(stdout, "kfake ready bootstrap=%s\n", strings.Join(c.ListenAddrs(), ","))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	<-ctx.Done()
	return 0
}
