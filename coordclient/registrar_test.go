package coordclient

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// A coordinator that stops answering (a paused or SIGKILLed process
// whose partitions have not moved yet) holds only the registrations of
// its own ids: through Routed over two coordinators, with one request in
// flight, a registration of the live coordinator's id is answered while
// one of the paused coordinator's, sent first, is still unanswered. With
// one queue for both coordinators the live id would go out only once the
// paused one's request had given up, and be answered after it.
func TestRegistrarPausedCoordinatorHoldsOnlyItsIDs(t *testing.T) {
	fakes, _ := startOwnerFakes(t, 2) // partition p is node p mod 2's
	routed := routedOver(t, fakes)
	live, paused := idIn(0, "live"), idIn(1, "paused")
	regOf := func(id string) *Registration {
		return &Registration{TxnID: id, PID: 7, Topic: "t", Partition: 0}
	}
	hold := make(chan struct{})
	var release sync.Once
	t.Cleanup(func() { release.Do(func() { close(hold) }) })
	reg := NewRegistrar(routed, 1, zerolog.Nop())
	t.Cleanup(reg.Close)

	// Both owners learned, as a leader's are once its ids have registered.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	warm := []*Registration{regOf(live), regOf(paused)}
	reg.Register(ctx, warm)
	for _, w := range warm {
		if w.Code != 0 {
			t.Fatalf("warm-up registration of %s: %s", w.TxnID, codeName(w.Code))
		}
	}

	fakes[1].set(func(f *ownerFake) { f.addHold = hold })
	before := fakes[1].count(24)
	pausedDone := make(chan int16, 1)
	go func() {
		r := regOf(paused)
		reg.Register(context.Background(), []*Registration{r})
		pausedDone <- r.Code
	}()
	waitFor(t, "the paused coordinator to receive its registration", func() bool { return fakes[1].count(24) > before })
	liveDone := make(chan int16, 1)
	go func() {
		r := regOf(live)
		reg.Register(context.Background(), []*Registration{r})
		liveDone <- r.Code
	}()
	select {
	case code := <-liveDone:
		if code != 0 {
			t.Fatalf("the live coordinator's registration: %s, want NONE", codeName(code))
		}
	case code := <-pausedDone:
		t.Fatalf("the paused coordinator's registration was answered (%s) before the live one's: the live id waited behind it", codeName(code))
	case <-time.After(60 * time.Second):
		t.Fatal("the live coordinator's registration was not answered in 60 s")
	}
	select {
	case code := <-pausedDone:
		t.Fatalf("the paused coordinator's registration was answered (%s) while its coordinator held it", codeName(code))
	default:
	}
	release.Do(func() { close(hold) })
	select {
	case <-pausedDone: // its code depends on whether an attempt timed out meanwhile
	case <-time.After(60 * time.Second):
		t.Fatal("the paused coordinator's registration was not answered in 60 s after it resumed")
	}
}
