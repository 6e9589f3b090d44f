package topics

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/authmeta"
	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/wire"
)

// AdoptClientID is the client id of a follower's CreateTopics for topics
// its leader holds data for and the controller does not know (a data dir
// of the release before the controller): the controller then creates the
// topic even with auto-creation off, unless it was deleted, which it
// answers UNKNOWN_TOPIC_OR_PARTITION so the leader drops the data.
const AdoptClientID = "txncoord-leader-adopt"

// FollowerConfig configures a Follower.
type FollowerConfig struct {
	View *cluster.View
	// Addr is the controller's (the coordinator node's) address.
	Addr string
	// Target, optional, names the controller's address now (the holder
	// of the controller's etcd lease); false: Addr.
	Target func() (string, bool)
	// Serving, optional, reports that this process runs the controller
	// now: the follower then polls only the security metadata (which
	// this process serves then too: nothing to mirror) and does not
	// auto-create through it.
	Serving func() bool
	// Track, without Target (a process without an etcd client, with
	// several coordinators): the controller is the node the last
	// Metadata answer named as ControllerID; when it cannot be reached
	// the follower asks the next coordinator, which names the holder.
	Track bool
	Dial  wire.DialConfig
	// Interval between polls (default 250 ms): a topic the controller
	// created shows in this node's Metadata within about that long, a
	// deleted one leaves it as fast.
	Interval time.Duration
	Log      zerolog.Logger
}

// Follower keeps the view of a node in a process of its own in step with
// the controller over the Kafka protocol: it polls Metadata (all topics,
// with ids) at the coordinator node, and again at once when a request
// names a topic the view does not know (the view's miss hook). Topics the
// controller no longer lists leave the view (the OnTopicRemoved hooks drop
// their data), and a topic whose id changed was deleted and created again
// in between: it leaves the view before the new one enters. Auto-creation
// asks the controller (Metadata with AllowAutoTopicCreation).
//
// Group configs (ListConfigResources, then DescribeConfigs of each group)
// are fetched with every topic's configs. Topic configs travel by
// DescribeConfigs at the controller (Metadata has none): a topic's explicit configs (source DYNAMIC_TOPIC_CONFIG) are
// fetched before it enters the view, so a leader enforces them
// (max.message.bytes, retention, message.timestamp.type) from its first
// record; every topic's are fetched again every configEvery polls (about
// a second) and at once by Refresh (after an alter this node forwarded).
//
// The controller's ACLs and finalized features travel on the same polls
// (DescribeAcls, ApiVersions, as the cluster principal): a leader in a
// process of its own enforces an ACL within a poll of its creation.
// SCRAM credentials do not: no Kafka API returns a stored credential.
type Follower struct {
	cfg FollowerConfig
	log zerolog.Logger

	// tracked is the controller's node id as Metadata last named it
	// (Track; -1: none yet, Addr).
	tracked atomic.Int32

	mu     sync.Mutex // one exchange at a time; guards cl and seen
	cl     *wire.Client
	clAddr string              // the address cl is connected to
	seen   map[string][16]byte // topics as the controller last listed them
	first  bool                // the first successful sync is still to come
	polls  int                 // syncs so far: every configEvery-th fetches every topic's configs

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

// NewFollower returns a follower; Start runs it.
func NewFollower(cfg FollowerConfig) *Follower {
	if cfg.Interval <= 0 {
		cfg.Interval = 250 * time.Millisecond
	}
	f := &Follower{cfg: cfg, log: cfg.Log.With().Str("component", "topics-follower").Logger(),
		seen: map[string][16]byte{}, first: true, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	f.tracked.Store(-1)
	return f
}

// Controller is the controller's node as this follower knows it: Target's,
// the one Metadata last named (Track), or the node at Addr.
func (f *Follower) Controller() (cluster.Node, bool) {
	addr := f.addr()
	for _, n := range f.cfg.View.Coordinators() {
		if n.Addr == addr {
			return n, true
		}
	}
	return cluster.Node{}, false
}

// ControllerAddr is the controller's address as this follower knows it (a
// ForwardFunc's target: DialForwardTo).
func (f *Follower) ControllerAddr() (string, error) { return f.addr(), nil }

// track records the ControllerID of a Metadata answer (Track).
func (f *Follower) track(id int32) {
	if !f.cfg.Track {
		return
	}
	for _, n := range f.cfg.View.Coordinators() {
		if n.NodeID == id {
			f.tracked.Store(id)
			return
		}
	}
}

// unreachable moves a tracking follower on to the coordinator after the
// one it could not reach: any live one names the holder.
func (f *Follower) unreachable(addr string) {
	if !f.cfg.Track {
		return
	}
	cs := f.cfg.View.Coordinators()
	for i, n := range cs {
		if n.Addr == addr {
			f.tracked.Store(cs[(i+1)%len(cs)].NodeID)
			return
		}
	}
}

// Start hooks the follower into the view (auto-creation and misses) and
// polls until Close. held lists the topics the node holds data for (with
// one more than the highest partition it holds); the first sync adopts
// those the controller does not know, and drop is called for those it
// deleted that are not in the view.
func (f *Follower) Start(held func() map[string]int32, drop func(topic string) error) {
	f.cfg.View.SetCreator(f.AutoCreate)
	f.cfg.View.SetMissHook(func(string) { f.Kick() })
	go f.loop(held, drop)
}

// Kick asks for a sync now; it never blocks.
func (f *Follower) Kick() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// Close stops polling.
func (f *Follower) Close() {
	select {
	case <-f.stop:
		return
	default:
	}
	f.cfg.View.SetCreator(nil)
	f.cfg.View.SetMissHook(nil)
	close(f.stop)
	<-f.done
	f.mu.Lock()
	if f.cl != nil {
		f.cl.Close()
		f.cl = nil
	}
	f.mu.Unlock()
}

func (f *Follower) loop(held func() map[string]int32, drop func(string) error) {
	defer close(f.done)
	tick := time.NewTicker(f.cfg.Interval)
	defer tick.Stop()
	failing := false
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var err error
		if f.cfg.Serving == nil || !f.cfg.Serving() {
			err = f.Sync(ctx, held, drop)
		} else {
			err = f.mirrorAuth(ctx) // the topics are this process's own
		}
		cancel()
		switch {
		case err != nil && !failing:
			f.log.Warn().Err(err).Str("controller", f.addr()).Msg("cannot learn topics from the controller; retrying")
			failing = true
		case err == nil && failing:
			f.log.Info().Str("controller", f.addr()).Msg("learning topics from the controller again")
			failing = false
		}
		select {
		case <-f.stop:
			return
		case <-tick.C:
		case <-f.kick:
			// Many misses at once share one sync; at most one in 50 ms.
			select {
			case <-f.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// addr is the controller's address now.
func (f *Follower) addr() string {
	if f.cfg.Target != nil {
		if a, ok := f.cfg.Target(); ok {
			return a
		}
	}
	if id := f.tracked.Load(); id >= 0 {
		if n, ok := f.cfg.View.Node(id); ok {
			return n.Addr
		}
	}
	return f.cfg.Addr
}

// do sends req to the controller, dialing if needed.
func (f *Follower) do(ctx context.Context, req kmsg.Request, clientID string) (kmsg.Response, error) {
	addr := f.addr()
	if clientID != "" { // a connection of its own, for its client id
		cl, err := wire.DialWith(ctx, addr, clientID, f.cfg.Dial)
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		return cl.Do(ctx, req)
	}
	if f.cl != nil && f.clAddr != addr { // the controller moved
		f.cl.Close()
		f.cl = nil
	}
	if f.cl == nil {
		cl, err := wire.DialWith(ctx, addr, "txncoord-topics-follower", f.cfg.Dial)
		if err != nil {
			f.unreachable(addr)
			return nil, err
		}
		f.cl, f.clAddr = cl, addr
	}
	resp, err := f.cl.Do(ctx, req)
	if err != nil {
		f.cl.Close()
		f.cl = nil
		f.unreachable(addr)
	}
	return resp, err
}

// metadata asks the controller for topics (nil: all), auto-creating them
// if create.
func (f *Follower) metadata(ctx context.Context, names []string, create bool) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12) // topic ids
	req.AllowAutoTopicCreation = create
	if names != nil {
		req.Topics = []kmsg.MetadataRequestTopic{}
		for _, n := range names {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(n)
			req.Topics = append(req.Topics, rt)
		}
	}
	resp, err := f.do(ctx, req, "")
	if err != nil {
		return nil, err
	}
	mresp := resp.(*kmsg.MetadataResponse)
	f.track(mresp.ControllerID)
	return mresp, nil
}

// configEvery: every configEvery-th sync fetches every topic's configs
// (with the 250 ms default interval, about once a second); the others
// only those of topics new to this node.
const configEvery = 4

// Sync brings the view in step with the controller once: topics, and the
// configs of topics new to this node (of every topic on the first sync
// and every configEvery-th).
func (f *Follower) Sync(ctx context.Context, held func() map[string]int32, drop func(string) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.polls++
	return f.syncLocked(ctx, held, drop, f.polls%configEvery == 1)
}

// Refresh syncs topics and every topic's configs now: after a change this
// node forwarded to the controller, so its own answers show it.
func (f *Follower) Refresh(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.syncLocked(ctx, nil, nil, true)
}

func (f *Follower) syncLocked(ctx context.Context, held func() map[string]int32, drop func(string) error, allConfigs bool) error {
	resp, err := f.metadata(ctx, nil, false)
	if err != nil {
		return err
	}
	listed := map[string]cluster.Topic{}
	var need []string // topics whose configs to fetch
	for _, t := range resp.Topics {
		if t.ErrorCode != 0 || t.Topic == nil || t.IsInternal {
			continue
		}
		name := *t.Topic
		listed[name] = topicOf(t)
		if old, ok := f.seen[name]; allConfigs || !ok || old != t.TopicID {
			need = append(need, name)
		}
	}
	configs, err := f.describeConfigs(ctx, need)
	if err != nil {
		return fmt.Errorf("topic configs: %w", err)
	}
	if allConfigs {
		if err := f.syncGroupConfigsLocked(ctx); err != nil {
			return fmt.Errorf("group configs: %w", err)
		}
	}
	if f.first && held != nil {
		if err := f.adoptLocked(ctx, listed, held(), drop); err != nil {
			f.log.Warn().Err(err).Msg("cannot ask the controller to adopt the topics this leader holds data for")
		}
		f.first = false
	}
	for name, t := range listed {
		if old, ok := f.seen[name]; ok && old != t.ID {
			f.cfg.View.RemoveTopic(name) // deleted and created again since the last sync
		}
		own := f.cfg.View.TopicConfigs(name)
		fetched, ok := configs[name]
		if cur, known := f.cfg.View.Known(name); !known || !cur.Equal(t) || ok && !maps.Equal(fetched, own) {
			if ok {
				own = fetched
			}
			f.cfg.View.SetTopic(t, own)
		}
	}
	for _, t := range f.cfg.View.Topics() {
		if _, ok := listed[t.Name]; !ok && !t.Internal {
			f.cfg.View.RemoveTopic(t.Name)
		}
	}
	f.seen = map[string][16]byte{}
	for name, t := range listed {
		f.seen[name] = t.ID
	}
	if err := f.mirrorAuthLocked(ctx); err != nil {
		return fmt.Errorf("security metadata: %w", err)
	}
	return nil
}

// mirrorAuth is mirrorAuthLocked for a process that runs the controller
// (its security metadata is attached then: nothing to mirror).
func (f *Follower) mirrorAuth(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.mirrorAuthLocked(ctx); err != nil {
		return fmt.Errorf("security metadata: %w", err)
	}
	return nil
}

// mirrorAuthLocked copies the controller's ACLs (DescribeAcls, every
// binding) and finalized features (ApiVersions) into this node's security
// metadata, so that its listeners enforce the ACLs created through the
// controller and finalize what UpdateFeatures set. A controller without an
// authorizer answers SECURITY_DISABLED: there are no ACLs to enforce.
func (f *Follower) mirrorAuthLocked(ctx context.Context) error {
	auth := f.cfg.View.AuthMeta()
	if auth.Attached() {
		return nil // this process is the controller
	}
	areq := kmsg.NewPtrDescribeACLsRequest()
	areq.ResourceType, areq.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	areq.Operation, areq.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	areq.SetVersion(2) // pattern types (v1+)
	raw, err := f.do(ctx, areq, "")
	if err != nil {
		return err
	}
	aresp := raw.(*kmsg.DescribeACLsResponse)
	var acls []authmeta.Binding
	switch aresp.ErrorCode {
	case kerr.SecurityDisabled.Code:
	case 0:
		acls = []authmeta.Binding{}
		for _, res := range aresp.Resources {
			for _, a := range res.ACLs {
				acls = append(acls, authmeta.Binding{ResourceType: res.ResourceType, Name: res.ResourceName, Pattern: res.ResourcePatternType,
					Principal: a.Principal, Host: a.Host, Operation: a.Operation, Permission: a.PermissionType})
			}
		}
	default:
		return fmt.Errorf("DescribeAcls: %w", kerr.ErrorForCode(aresp.ErrorCode))
	}
	vreq := kmsg.NewPtrApiVersionsRequest()
	vreq.SetVersion(3) // finalized features (v3+)
	vreq.ClientSoftwareName, vreq.ClientSoftwareVersion = "txncoord", "follower"
	raw, err = f.do(ctx, vreq, "")
	if err != nil {
		return err
	}
	vresp := raw.(*kmsg.ApiVersionsResponse)
	if vresp.ErrorCode != 0 {
		return fmt.Errorf("ApiVersions: %w", kerr.ErrorForCode(vresp.ErrorCode))
	}
	features := map[string]int16{}
	for _, ff := range vresp.FinalizedFeatures {
		features[ff.Name] = ff.MaxVersionLevel
	}
	auth.Mirror(acls, features, vresp.FinalizedFeaturesEpoch)
	return nil
}

// describeConfigs asks the controller for the explicit configs (source
// DYNAMIC_TOPIC_CONFIG) of names; a topic it no longer has is left out.
func (f *Follower) describeConfigs(ctx context.Context, names []string) (map[string]map[string]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.SetVersion(2) // sources (v1+)
	for _, n := range names {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, n
		req.Resources = append(req.Resources, rr)
	}
	raw, err := f.do(ctx, req, "")
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for _, rr := range raw.(*kmsg.DescribeConfigsResponse).Resources {
		if rr.ErrorCode != 0 {
			continue // deleted since the Metadata answer: the next sync drops it
		}
		own := map[string]string{}
		for _, c := range rr.Configs {
			if c.Source == kmsg.ConfigSourceDynamicTopicConfig && c.Value != nil {
				own[c.Name] = *c.Value
			}
		}
		out[rr.ResourceName] = own
	}
	return out, nil
}

// syncGroupConfigsLocked brings the view's group configs (the share
// groups' group.share.* settings, which a leader applies to its share
// partitions) in step with the controller's: ListConfigResources names
// the groups with configs of their own, DescribeConfigs gives each one's
// explicit configs (source GROUP_CONFIG); a group no longer listed has
// none left.
func (f *Follower) syncGroupConfigsLocked(ctx context.Context) error {
	list := kmsg.NewPtrListConfigResourcesRequest()
	list.SetVersion(1)
	list.ResourceTypes = []int8{int8(kmsg.ConfigResourceTypeGroupConfig)}
	raw, err := f.do(ctx, list, "")
	if err != nil {
		return err
	}
	lresp := raw.(*kmsg.ListConfigResourcesResponse)
	if err := kerr.ErrorForCode(lresp.ErrorCode); err != nil {
		return err
	}
	fetched := map[string]map[string]string{}
	if len(lresp.ConfigResources) > 0 {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.SetVersion(2)
		for _, cr := range lresp.ConfigResources {
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, cr.Name
			req.Resources = append(req.Resources, rr)
		}
		raw, err := f.do(ctx, req, "")
		if err != nil {
			return err
		}
		for _, rr := range raw.(*kmsg.DescribeConfigsResponse).Resources {
			if rr.ErrorCode != 0 {
				continue
			}
			own := map[string]string{}
			for _, c := range rr.Configs {
				if c.Source == kmsg.ConfigSourceGroupConfig && c.Value != nil {
					own[c.Name] = *c.Value
				}
			}
			fetched[rr.ResourceName] = own
		}
	}
	for _, g := range f.cfg.View.GroupsWithConfigs() {
		if _, ok := fetched[g]; !ok {
			f.cfg.View.SetGroupConfigs(g, nil)
		}
	}
	for g, own := range fetched {
		if !maps.Equal(own, f.cfg.View.GroupConfigs(g)) {
			f.cfg.View.SetGroupConfigs(g, own)
		}
	}
	return nil
}

// adoptLocked asks the controller to create the topics this node holds
// data for that it does not list; a deleted one's data is dropped.
func (f *Follower) adoptLocked(ctx context.Context, listed map[string]cluster.Topic, held map[string]int32, drop func(string) error) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	for name, n := range held {
		if _, ok := listed[name]; ok {
			continue
		}
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, n, -1
		req.Topics = append(req.Topics, rt)
	}
	if len(req.Topics) == 0 {
		return nil
	}
	raw, err := f.do(ctx, req, AdoptClientID)
	if err != nil {
		return err
	}
	for _, rt := range raw.(*kmsg.CreateTopicsResponse).Topics {
		switch rt.ErrorCode {
		case 0:
			listed[rt.Topic] = cluster.Topic{Name: rt.Topic, ID: rt.TopicID, Partitions: rt.NumPartitions}
			f.log.Info().Str("topic", rt.Topic).Msg("topic this leader holds data for adopted by the controller")
		case kerr.UnknownTopicOrPartition.Code:
			f.log.Info().Str("topic", rt.Topic).Msg("topic this leader holds data for was deleted: dropping its data")
			if !f.cfg.View.RemoveTopic(rt.Topic) && drop != nil {
				if err := drop(rt.Topic); err != nil {
					return err
				}
			}
		default:
			f.log.Warn().Str("topic", rt.Topic).Str("error", kerr.ErrorForCode(rt.ErrorCode).Error()).Msg("controller refused to adopt a topic this leader holds data for")
		}
	}
	return nil
}

// topicOf is a topic as the controller's Metadata lists it, with every
// partition's replica list as the controller placed it: the first replica
// leads, by hand or by the rule alike.
func topicOf(t kmsg.MetadataResponseTopic) cluster.Topic {
	out := cluster.Topic{Name: *t.Topic, ID: t.TopicID, Partitions: int32(len(t.Partitions)),
		Replicas: make([][]int32, len(t.Partitions))}
	for _, p := range t.Partitions {
		if p.Partition >= 0 && int(p.Partition) < len(out.Replicas) && len(p.Replicas) > 0 {
			out.Replicas[p.Partition] = slices.Clone(p.Replicas)
		}
	}
	return out
}

// AutoCreate is the view's creator on a follower: the controller creates
// the topic (or refuses), and the view learns it from the answer.
func (f *Follower) AutoCreate(name string) (cluster.Topic, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	f.mu.Lock()
	defer f.mu.Unlock()
	resp, err := f.metadata(ctx, []string{name}, f.cfg.View.AutoCreateTopics())
	if err != nil {
		return cluster.Topic{}, fmt.Errorf("ask the controller: %v: %w", err, kerr.LeaderNotAvailable)
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != name {
			continue
		}
		if t.ErrorCode != 0 {
			return cluster.Topic{}, kerr.ErrorForCode(t.ErrorCode)
		}
		topic := topicOf(t)
		// The topic may exist already, created with configs: they
		// enter the view with it.
		configs, err := f.describeConfigs(ctx, []string{name})
		if err != nil {
			return cluster.Topic{}, fmt.Errorf("ask the controller for the configs of %s: %v: %w", name, err, kerr.LeaderNotAvailable)
		}
		f.cfg.View.SetTopic(topic, configs[name])
		return topic, nil
	}
	return cluster.Topic{}, errors.New("controller did not answer for the topic")
}
