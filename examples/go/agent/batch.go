package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"triadgo/triad"
)

// batchesAtOnce is how many step request batches this process works on at once (§8, Batches).
const batchesAtOnce = 2

// pullBatches takes step request batches from batch-<type> while a slot is free, until ctx ends. Pulling
// from that durable is what tells schedulers this agent takes batches (decision 0023).
func (a *agent) pullBatches(ctx, run context.Context, sub *nats.Subscription, wg *sync.WaitGroup) {
	inFlight := make(chan struct{}, batchesAtOnce)
	for ctx.Err() == nil {
		if len(a.slots) == cap(a.slots) || len(inFlight) == cap(inFlight) {
			select {
			case <-time.After(20 * time.Millisecond):
			case <-ctx.Done():
			}
			continue
		}
		msgs, err := sub.Fetch(1, nats.MaxWait(time.Second))
		if err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			a.log.Printf("pulling step request batches: %v (trying again)", err)
			time.Sleep(500 * time.Millisecond)
		}
		for _, m := range msgs {
			inFlight <- struct{}{}
			wg.Add(1)
			go func(m *nats.Msg) {
				defer func() { <-inFlight; wg.Done() }()
				a.handleBatch(run, m)
			}(m)
		}
	}
}

// handleBatch serves one batch: each request on its own — validated, run, reported or dead-lettered
// alone, each taking a slot — while the batch is kept alive; acknowledged once every request is settled.
func (a *agent) handleBatch(run context.Context, m *nats.Msg) {
	receivedAt := time.Now()
	deliveries := deliveriesOf(m)
	if reason := a.refused(m, deliveries); reason != "" {
		a.deadLetter(m, receivedAt, deliveries, reason)
		return
	}
	items, err := triad.ParseStepRequestBatch(m.Data)
	if err != nil {
		// Nothing in it can be read: dead-lettered whole.
		a.deadLetter(m, receivedAt, deliveries, "invalid step request batch: "+err.Error())
		return
	}
	stop := keepAlive(m, a.ackWait/3)
	var handedBack atomic.Bool
	var pending sync.WaitGroup
	for i, data := range items {
		pending.Add(1)
		go func(i int, data []byte) {
			defer pending.Done()
			a.slots <- struct{}{}
			defer a.release()
			l := &itemLease{a: a, receivedAt: receivedAt, deliveries: deliveries, where: fmt.Sprintf("request %d of %d in a batch", i+1, len(items))}
			a.serveRequest(run, data, m.Subject, deliveries, l)
			if l.handedBack {
				handedBack.Store(true)
			}
		}(i, data)
	}
	pending.Wait()
	stop()
	if handedBack.Load() {
		// Shutting down with requests unfinished: the whole batch comes back (the finished ones are
		// fenced and idempotent when they run again).
		if err := m.Nak(); err != nil {
			a.log.Printf("handing a batch back failed (%v); it returns after the ack wait", err)
		}
		return
	}
	a.ack(m, fmt.Sprintf("batch of %d requests", len(items)))
}

// itemLease is a request's share of its batch: the batch is kept alive and acknowledged by handleBatch.
type itemLease struct {
	a          *agent
	receivedAt time.Time
	deliveries int64
	where      string
	handedBack bool
}

func (l *itemLease) keepAlive() func()     { return func() {} }
func (l *itemLease) settled(string)        {}
func (l *itemLease) handBack(label string) { l.handedBack = true }
func (l *itemLease) notStored(label string, err error) {
	// Not redelivered: that would run its neighbours again. The supervisor retries it after its complete-by.
	l.a.log.Printf("%s (%s): the result could not be stored (%v); the supervisor retries the step after its complete-by", label, l.where, err)
}

// deadLetter dead-letters this request alone, with its own bytes, under its agent type's own subject
// (so a replay sends it alone); its neighbours run.
func (l *itemLease) deadLetter(reason string, data []byte) {
	reason = l.where + ": " + reason
	if err := l.a.publishDeadLetter(data, l.a.names.Step(l.a.agentType), l.receivedAt, l.deliveries, reason); err != nil {
		l.a.log.Printf("dead letter of a request in a batch not stored (%v); it is dropped (its step, if real, is retried after its complete-by): %s", err, reason)
		return
	}
	l.a.log.Printf("dead-lettered a request in a batch: %s", reason)
}
