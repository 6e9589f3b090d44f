package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// An apiSet is API keys with a version each: the highest version kfake was
// asked for, or the highest txncoord advertises.
//
// It is how the run tells which tests need an API txncoord does not serve:
// the control cluster records what each test asked of it (serve-kfake
// --apis), and a failing txncoord test's keys are compared with
// txncoord's ApiVersions. A test that fails on its first request (most
// fail creating a topic) says nothing about the rest; this does.
type apiSet map[int16]int16

func (s apiSet) add(key, version int16) {
	if v, ok := s[key]; !ok || version > v {
		s[key] = version
	}
}

func (s apiSet) keys() []int16 {
	keys := make([]int16, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// write stores s as lines "key version name" (the name for a reader).
func (s apiSet) write(path string) error {
	var b strings.Builder
	for _, k := range s.keys() {
		fmt.Fprintf(&b, "%d %d %s\n", k, s[k], kmsg.NameForKey(k))
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func readAPISet(path string) (apiSet, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s := apiSet{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		k, err1 := strconv.ParseInt(fields[0], 10, 16)
		v, err2 := strconv.ParseInt(fields[1], 10, 16)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s: bad line %q", path, sc.Text())
		}
		s.add(int16(k), int16(v))
	}
	return s, sc.Err()
}

// advertisedAPIs asks the server at bootstrap for its ApiVersions.
func advertisedAPIs(bootstrap string) (apiSet, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	s := apiSet{}
	for _, k := range resp.ApiKeys {
		s.add(k.ApiKey, k.MaxVersion)
	}
	return s, nil
}

// optionalAPIs are keys a client sends only to a broker that advertises
// them and does without otherwise: client telemetry (KIP-714).
var optionalAPIs = map[int16]bool{71: true, 72: true}

// missing names the keys of used that served lacks, as "CreateTopics(19)".
// ConsumerGroupHeartbeat (68) counts: kgo's tests fall back to the classic
// protocol without it, but Test848RegexBrokerResolves skips and
// TestGroupSimple/848 is not run.
func missing(used, served apiSet) []string {
	var out []string
	for _, k := range used.keys() {
		if _, ok := served[k]; !ok && !optionalAPIs[k] {
			out = append(out, fmt.Sprintf("%s(%d)", kmsg.NameForKey(k), k))
		}
	}
	return out
}
