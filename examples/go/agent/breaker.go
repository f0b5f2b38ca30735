package main

// A small hand-written circuit breaker: Debian packages no circuit-breaker library for Go, and the
// examples build from Debian's packages alone (nothing is downloaded). It behaves like the TypeScript
// agent host's (cockatiel's ConsecutiveBreaker, decision 0003): closed → open after threshold
// consecutive retryable failures → half-open after halfOpenAfter, where one trial call decides: success
// closes it, a retryable failure opens it again.

import (
	"fmt"
	"log"
	"strconv"
	"sync"
	"time"
)

// Defaults as the TypeScript agent host's.
const (
	defaultBreakerThreshold = 5
	defaultBreakerHalfOpen  = 5 * time.Second
)

type breakerState int

const (
	closed breakerState = iota
	open
	halfOpen // a trial call is in flight
)

// verdict is what a call the breaker let through says of the service's health.
type verdict int

const (
	// succeeded: the service answered.
	succeeded verdict = iota
	// failedRetryable: the service failed in a way retrying may fix (unavailable, timed out, unreachable).
	failedRetryable
	// failedPermanent: the service refused the request; that says nothing against its health. It does
	// not count, and like cockatiel's it closes a half-open breaker (the service answered).
	failedPermanent
	// abandoned: the call was stopped by the agent itself (shutting down): no verdict.
	abandoned
)

// breaker guards the calls of one agent process (it serves one agent type) to its service. Steps run
// concurrently: every method is safe to call from any goroutine.
type breaker struct {
	threshold     int
	halfOpenAfter time.Duration
	log           *log.Logger
	now           func() time.Time

	mu       sync.Mutex
	state    breakerState
	failures int       // consecutive retryable failures while closed
	openedAt time.Time // when it last opened
	// gen changes with every change of state: a call let through in an earlier state (one still running
	// when the breaker opened) has no say in the current one.
	gen uint64
}

// ticket is a call's permission: hand it back to done with the call's verdict.
type ticket struct {
	gen   uint64
	trial bool
}

func newBreaker(threshold int, halfOpenAfter time.Duration, logger *log.Logger) *breaker {
	return &breaker{threshold: threshold, halfOpenAfter: halfOpenAfter, log: logger, now: time.Now}
}

// allow says whether a call may be made now. If not, retryAfter is how long until the breaker lets a
// trial call through: the rest of the open period, or the whole period while another call is the trial
// (it may well fail and open the breaker again).
func (b *breaker) allow() (t ticket, ok bool, retryAfter time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case closed:
		return ticket{gen: b.gen}, true, 0
	case open:
		if wait := b.halfOpenAfter - b.now().Sub(b.openedAt); wait > 0 {
			return ticket{}, false, wait
		}
		b.state = halfOpen
		b.gen++
		b.log.Printf("circuit half-open: one trial call to the service")
		return ticket{gen: b.gen, trial: true}, true, 0
	default:
		return ticket{}, false, b.halfOpenAfter
	}
}

// done records the verdict of a call allow let through.
func (b *breaker) done(t ticket, v verdict) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t.gen != b.gen {
		return
	}
	switch {
	case t.trial && (v == succeeded || v == failedPermanent):
		b.state, b.failures = closed, 0
		b.gen++
		b.log.Printf("circuit closed")
	case t.trial && v == failedRetryable:
		b.trip()
	case t.trial: // abandoned: open as before, its period over, so the next call is the trial
		b.state = open
		b.gen++
	case v == succeeded:
		b.failures = 0
	case v == failedRetryable:
		b.failures++
		if b.failures >= b.threshold {
			b.trip()
		}
	}
}

// trip opens the breaker now. Called with mu held.
func (b *breaker) trip() {
	b.state, b.failures, b.openedAt = open, 0, b.now()
	b.gen++
	b.log.Printf("circuit opened: steps are parked until it half-opens in %s", b.halfOpenAfter)
}

// breakerSetting reads a whole number >= 1 from the environment variable name, fallback when unset or
// empty; the error names the variable and what it allows.
func breakerSetting(getenv func(string) string, name string, fallback int) (int, error) {
	v := getenv(name)
	if v == "" {
		return fallback, nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s must be a whole number from 1 to 2147483647 (got %q)", name, v)
	}
	return int(n), nil
}
