package main

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/vmihailenco/msgpack/v5"

	"triadgo/triad"
)

// holding is what this process answers a probe with (decision 0021 §3.3): the attempts it runs now.
type holding struct {
	mu sync.Mutex
	m  map[string]*triad.ProbeReply
}

func holdingKey(taskID, step, kind string, attempt int64, item *int64) string {
	i := ""
	if item != nil {
		i = fmt.Sprint(*item)
	}
	return strings.Join([]string{taskID, step, kind, fmt.Sprint(attempt), i}, "|")
}

func itemOf(req *triad.StepRequest) *int64 {
	if req.Item == nil {
		return nil
	}
	i := req.Item.Index
	return &i
}

// hold records that this process took the request; the returned func forgets it.
func (a *agent) hold(req *triad.StepRequest) (forget func()) {
	key := holdingKey(req.TaskID, req.Step, req.Kind, req.Attempt, itemOf(req))
	a.held.mu.Lock()
	if a.held.m == nil {
		a.held.m = map[string]*triad.ProbeReply{}
	}
	a.held.m[key] = &triad.ProbeReply{TaskID: req.TaskID, Step: req.Step, Kind: req.Kind, Attempt: req.Attempt, Item: itemOf(req), AgentID: a.agentID, Since: time.Now().UnixMilli(), State: "calling"}
	a.held.mu.Unlock()
	return func() {
		a.held.mu.Lock()
		delete(a.held.m, key)
		a.held.mu.Unlock()
	}
}

// tryState records the try in progress: calling, or backing off until next.
func (a *agent) tryState(req *triad.StepRequest, try int64, state string, next time.Time) {
	key := holdingKey(req.TaskID, req.Step, req.Kind, req.Attempt, itemOf(req))
	a.held.mu.Lock()
	defer a.held.mu.Unlock()
	if h := a.held.m[key]; h != nil {
		h.Try, h.State, h.NextTryAt = try, state, 0
		if !next.IsZero() {
			h.NextTryAt = next.UnixMilli()
		}
	}
}

// answerProbes subscribes to triad.<ns>.probe.<type> (every instance hears each probe) and answers only
// for an attempt it holds, only on a reply subject under triad.<ns>.probed.<type>. (its permissions allow no other).
func (a *agent) answerProbes() (*nats.Subscription, error) {
	prefix := a.names.ProbedPrefix(a.agentType)
	return a.nc.Subscribe(a.names.Probe(a.agentType), func(m *nats.Msg) {
		if !strings.HasPrefix(m.Reply, prefix) {
			return
		}
		p, err := triad.ParseProbeRequest(m.Data)
		if err != nil {
			return
		}
		a.held.mu.Lock()
		h := a.held.m[holdingKey(p.TaskID, p.Step, p.Kind, p.Attempt, p.Item)]
		var answer triad.ProbeReply
		if h != nil {
			answer = *h
		}
		a.held.mu.Unlock()
		if h == nil {
			return
		}
		if data, err := msgpack.Marshal(&answer); err == nil {
			_ = a.nc.Publish(m.Reply, data)
		}
	})
}
