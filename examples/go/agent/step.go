package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
	"github.com/vmihailenco/msgpack/v5"

	"triadgo/triad"
)

// clockSkewMargin: a request whose complete-by is this close is dropped, not started (§8.3).
const clockSkewMargin = 50 * time.Millisecond

// screenAction is the effect the fraud service applies: a screening of the order.
const screenAction = "screen"

// defaultRetry applies when a request carries no retry policy.
var defaultRetry = triad.RetryPolicy{MaxAttempts: 3, InitialDelayMs: 100, MaxDelayMs: 1_000}

// outcome of running a step: a result to report, or silence.
type outcome struct {
	result *triad.StepResult
	// silent: complete-by was reached; nothing is sent back (§8.6).
	silent bool
	// handedBack: the agent is shutting down and stopped the step; the request goes back to the stream.
	handedBack bool
}

// tries is how many calls the outcome's attempt made (0 when silent or handed back).
func (o outcome) tries() int64 {
	if o.result == nil {
		return 0
	}
	return o.result.Tries
}

// handle serves one delivery of a step request, from reading it to acknowledging it.
func (a *agent) handle(run context.Context, m *nats.Msg) {
	receivedAt := time.Now()
	var deliveries int64 = 1
	if meta, err := m.Metadata(); err == nil {
		deliveries = int64(meta.NumDelivered)
	}
	if !triad.SupportedVersion(m.Header.Get(triad.ProtocolHeader)) {
		a.deadLetter(m, receivedAt, deliveries, fmt.Sprintf("protocol version %q is not supported: this agent speaks Triad-Protocol %s", m.Header.Get(triad.ProtocolHeader), triad.ProtocolVersion))
		return
	}
	if deliveries > triad.MaxDeliveries {
		a.deadLetter(m, receivedAt, deliveries, fmt.Sprintf("delivered %d times, more than %d: given up", deliveries, triad.MaxDeliveries))
		return
	}
	req, err := triad.ParseStepRequest(m.Data)
	if err != nil {
		a.deadLetter(m, receivedAt, deliveries, "invalid step request: "+err.Error())
		return
	}
	if req.Agent != a.agentType {
		a.deadLetter(m, receivedAt, deliveries, fmt.Sprintf("agent: the request is for agent %q but arrived on %s, the subject of agent %q", req.Agent, m.Subject, a.agentType))
		return
	}
	label := fmt.Sprintf("%s/%s %s attempt %d", req.TaskID, req.Step, req.Kind, req.Attempt)
	if !time.Now().Add(clockSkewMargin).Before(req.CompleteByTime()) {
		// The supervisor has moved on: running it now could only race a newer attempt (§8.3).
		a.log.Printf("%s: dropped, its complete-by (%s) has passed", label, req.CompleteByTime().Format(time.RFC3339Nano))
		a.ack(m, label)
		return
	}

	// The JetStream message is the lease on the step: keep it while working (§8.4).
	stopKeepAlive := keepAlive(m, a.ackWait/3)
	defer stopKeepAlive()

	window, cancel := context.WithDeadline(run, req.CompleteByTime())
	defer cancel()
	forget := a.hold(req)
	defer forget()
	o := a.runStep(run, window, req)
	a.tryState(req, o.tries(), "sending", time.Time{})
	switch {
	case o.handedBack:
		stopKeepAlive()
		a.log.Printf("%s: handed back unfinished (shutting down); another agent will run it", label)
		if err := m.Nak(); err != nil {
			a.log.Printf("%s: handing back failed (%v); it returns after the ack wait", label, err)
		}
		return
	case o.silent:
		stopKeepAlive()
		a.log.Printf("%s: complete-by reached, stopped; sending nothing back", label)
		a.ack(m, label)
		return
	}
	if err := a.publishResult(run, o.result); err != nil {
		stopKeepAlive()
		a.log.Printf("%s: the result could not be stored (%v); not acknowledging, the request comes back after the ack wait", label, err)
		return
	}
	// Acknowledged only now that JetStream holds the result (§8.8): a crash before this re-runs the
	// attempt, which the idempotency key and the scheduler's fencing make harmless.
	a.ack(m, label)
	switch {
	case o.result.OK:
		a.log.Printf("%s: ok after %d tries", label, o.result.Tries)
	case o.result.Error.CircuitOpen:
		a.log.Printf("%s: circuit breaker open after %d tries: parked for %d ms", label, o.result.Tries, o.result.Error.RetryAfterMs)
	case o.result.Error.Throttled:
		a.log.Printf("%s: throttled by the service after %d tries: waits %d ms", label, o.result.Tries, o.result.Error.RetryAfterMs)
	default:
		a.log.Printf("%s: failed after %d tries (retryable=%t, effect=%s): %s", label, o.result.Tries, o.result.Error.Retryable, o.result.Error.Effect, o.result.Error.Message)
	}
}

// keepAlive sends "+WPI" (working) every interval until the returned stop is called (any number of times).
func keepAlive(m *nats.Msg, interval time.Duration) (stop func()) {
	done := make(chan struct{})
	ticker := time.NewTicker(interval)
	go func() {
		defer ticker.Stop()
		for {
			select {
			case <-done:
				return
			case <-ticker.C:
				_ = m.InProgress()
			}
		}
	}()
	stopped := false
	return func() {
		if !stopped {
			stopped = true
			close(done)
		}
	}
}

// runStep calls the service with retries inside the window. run ends at shutdown; window at complete-by.
func (a *agent) runStep(run, window context.Context, req *triad.StepRequest) outcome {
	tries := int64(0)
	fail := func(msg string, retryable, applied bool) outcome {
		effect := "none"
		if applied {
			effect = "unknown"
		}
		return outcome{result: a.result(req, tries, false, nil, &triad.StepError{Message: triad.Clip(msg), Retryable: retryable, Effect: effect})}
	}
	// References in the input, the needs and an element's value are read first (§12): the service gets
	// plain values. The download counts against complete-by.
	if err := a.resolvePayloads(req); err != nil {
		return fail("cannot read the step's payload: "+err.Error(), false, false)
	}
	path, body, err := a.request(req)
	if err != nil {
		return fail(err.Error(), false, false)
	}
	policy := defaultRetry
	if req.Retry != nil {
		policy = *req.Retry
	}
	mayHaveApplied := false
	for {
		// Every call goes through the breaker: while it is open the step stops trying and is parked.
		permit, allowed, retryAfter := a.breaker.allow()
		if !allowed {
			return a.circuitOpen(req, tries, retryAfter, mayHaveApplied)
		}
		tries++
		a.tryState(req, tries, "calling", time.Time{})
		answer, err := a.service.call(window, path, body)
		a.breaker.done(permit, verdictOf(run, err))
		if stop, o := stopped(run, window); stop {
			return o
		}
		if err == nil {
			output := answer
			if req.Kind == triad.KindRun {
				// The service's answer is {applied, duplicate, result}: the step's output is the result.
				output, _ = answer["result"].(map[string]interface{})
			}
			return outcome{result: a.result(req, tries, true, output, nil)}
		}
		var ce *callError
		if !errors.As(err, &ce) {
			ce = &callError{msg: err.Error()}
		}
		if !ce.notApplied {
			mayHaveApplied = true
		}
		if ce.throttled {
			// The service asked for time: no further call in this window (decision 0020 §5.3).
			effect := "none"
			if mayHaveApplied {
				effect = "unknown"
			}
			e := &triad.StepError{Message: triad.Clip(ce.msg), Retryable: true, Throttled: true, RetryAfterMs: ce.retryAfterMs, Effect: effect}
			return outcome{result: a.result(req, tries, false, nil, e)}
		}
		if ce.permanent {
			return fail(ce.msg, false, mayHaveApplied)
		}
		if tries >= policy.MaxAttempts {
			return fail(fmt.Sprintf("%s (after %d tries)", ce.msg, tries), true, mayHaveApplied)
		}
		wait := backoff(policy, tries)
		a.tryState(req, tries, "backing_off", time.Now().Add(wait))
		select {
		case <-time.After(wait):
		case <-window.Done():
		}
		if stop, o := stopped(run, window); stop {
			return o
		}
	}
}

// verdictOf is what a call's error says of the service's health. A call that outlasted the step's
// window counts as a failure (the service did not answer in time); one stopped at shutdown says nothing.
func verdictOf(run context.Context, err error) verdict {
	var ce *callError
	switch {
	case err == nil:
		return succeeded
	case run.Err() != nil:
		return abandoned
	case errors.As(err, &ce) && (ce.permanent || ce.throttled):
		// A throttle says nothing against the service's health either: "slow down" is not "down".
		return failedPermanent
	}
	return failedRetryable
}

// circuitOpen is the result of a step the open breaker stopped before its next call (§8.7): retryable,
// circuitOpen with retryAfterMs, so the scheduler parks the step without counting a failure. tries are
// the calls made before the breaker opened; the effect is "none" only if none of them can have applied.
func (a *agent) circuitOpen(req *triad.StepRequest, tries int64, retryAfter time.Duration, mayHaveApplied bool) outcome {
	effect := "none"
	if mayHaveApplied {
		effect = "unknown"
	}
	msg := fmt.Sprintf("the circuit breaker of agent %q is open; the step was not attempted", a.agentType)
	if tries > 0 {
		msg = fmt.Sprintf("the circuit breaker of agent %q is open; the step was not tried again after %d tries", a.agentType, tries)
	}
	// Whole milliseconds, rounded up: the breaker must have half-opened when the step comes back.
	ms := int64((retryAfter + time.Millisecond - 1) / time.Millisecond)
	if ms < 1 {
		ms = 1
	}
	e := &triad.StepError{Message: msg, Retryable: true, CircuitOpen: true, RetryAfterMs: ms, Effect: effect}
	return outcome{result: a.result(req, tries, false, nil, e)}
}

// stopped says whether the step must stop now, and how: handed back at shutdown, silent at complete-by.
func stopped(run, window context.Context) (bool, outcome) {
	if run.Err() != nil {
		return true, outcome{handedBack: true}
	}
	if window.Err() != nil {
		return true, outcome{silent: true}
	}
	return false, outcome{}
}

// backoff is the wait before try n+1: exponential from initialDelayMs, capped at maxDelayMs, with jitter.
func backoff(p triad.RetryPolicy, tries int64) time.Duration {
	d := float64(p.InitialDelayMs)
	for i := int64(1); i < tries && d < float64(p.MaxDelayMs); i++ {
		d *= 2
	}
	if d > float64(p.MaxDelayMs) {
		d = float64(p.MaxDelayMs)
	}
	return time.Duration((d/2 + rand.Float64()*d/2) * float64(time.Millisecond))
}

// resolvePayloads replaces the request's object references by their values (§12).
func (a *agent) resolvePayloads(req *triad.StepRequest) error {
	read := func(r *triad.ObjectRef) ([]byte, error) { return triad.ReadObject(a.nc, r) }
	input, err := triad.ResolveRefs(req.Input, read)
	if err != nil {
		return err
	}
	req.Input = input
	for k, v := range req.Needs {
		if req.Needs[k], err = triad.ResolveRefs(v, read); err != nil {
			return err
		}
	}
	if req.Item != nil {
		if req.Item.Value, err = triad.ResolveRefs(req.Item.Value, read); err != nil {
			return err
		}
	}
	return nil
}

// request is the service call a step request asks for: the fraud screening, or the undo of a run.
func (a *agent) request(req *triad.StepRequest) (string, interface{}, error) {
	if req.Kind == triad.KindCompensate {
		if req.Undoes == "" {
			return "", nil, errors.New("undoes: a compensation request must name the idempotency key of the run it undoes")
		}
		return "/undo", map[string]interface{}{"idempotencyKey": req.IdempotencyKey, "of": req.Undoes}, nil
	}
	input, ok := req.Input.(map[string]interface{})
	if !ok {
		return "", nil, fmt.Errorf("input: expected a map {orderId, amount}, got %T", req.Input)
	}
	f := triad.NewFields(input, "input.")
	orderID := f.String("orderId", true, triad.Length(1, 1_000))
	amount := input["amount"]
	if !nonNegativeNumber(amount) {
		f.Problems = append(f.Problems, fmt.Sprintf("input.amount: expected a number >= 0, got %v", amount))
	}
	if err := f.Err(); err != nil {
		return "", nil, err
	}
	payload := map[string]interface{}{"orderId": orderID, "amount": amount}
	if req.Item != nil {
		// A fan-out element is screened on its own, under its own key (the request's idempotencyKey).
		payload["item"] = req.Item.Value
		payload["index"] = req.Item.Index
	}
	return "/apply", map[string]interface{}{
		"idempotencyKey": req.IdempotencyKey,
		"action":         screenAction,
		"payload":        payload,
	}, nil
}

func nonNegativeNumber(v interface{}) bool {
	switch n := v.(type) {
	case float32:
		return n >= 0
	case float64:
		return n >= 0
	}
	i, isInt := triad.AsInt(v)
	return isInt && i >= 0
}

func (a *agent) result(req *triad.StepRequest, tries int64, ok bool, output interface{}, e *triad.StepError) *triad.StepResult {
	if ok {
		// An output above the inline threshold goes to the task's client's bucket, under this attempt (§12).
		sent, err := triad.Offload(output, "output", func(data []byte) (*triad.ObjectRef, error) {
			if req.Bucket == "" {
				return nil, fmt.Errorf("the output is %d bytes, above the inline limit, and the request names no bucket: upgrade the schedulers", len(data))
			}
			step := req.Step
			if req.Item != nil {
				step = fmt.Sprintf("%s#%d", step, req.Item.Index)
			}
			return triad.PutObject(a.js, req.Bucket, fmt.Sprintf("%s/%s/%s/%d/%s", req.TaskID, step, req.Kind, req.Attempt, nuid.Next()), data)
		})
		if err != nil {
			ok, output, e = false, nil, &triad.StepError{Message: triad.Clip(err.Error()), Retryable: true, Effect: "unknown"}
		} else {
			output = sent
		}
	}
	r := &triad.StepResult{
		TaskID: req.TaskID, Step: req.Step, Kind: req.Kind, Attempt: req.Attempt,
		AgentID: a.agentID, FinishedAt: time.Now().UnixMilli(), Tries: tries, OK: ok, Output: output, Error: e,
	}
	if req.Item != nil {
		// A fan-out element: its result names it (§8.7).
		index := req.Item.Index
		r.Item = &index
	}
	return r
}

// publishResult stores the result in the RESULTS stream on this agent type's subject, retrying while
// NATS is away (up to a minute, or until shutdown).
func (a *agent) publishResult(run context.Context, r *triad.StepResult) error {
	data, err := msgpack.Marshal(r)
	if err != nil {
		return fmt.Errorf("encoding the result: %w", err)
	}
	msg := nats.NewMsg(a.names.Result(a.agentType))
	msg.Header.Set(triad.MsgIDHeader, triad.ResultMsgID(r.TaskID, r.Step, r.Kind, r.Attempt, r.Item))
	msg.Header.Set(triad.ProtocolHeader, triad.ProtocolVersion)
	msg.Data = data
	give := time.Now().Add(time.Minute)
	for {
		_, err = a.js.PublishMsg(msg, nats.AckWait(2*time.Second))
		if err == nil || time.Now().After(give) || run.Err() != nil {
			return err
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// deadLetter publishes a request the agent cannot handle, with the reason, then acknowledges it (§7).
func (a *agent) deadLetter(m *nats.Msg, receivedAt time.Time, deliveries int64, reason string) {
	source := "step." + a.agentType
	data, err := msgpack.Marshal(&triad.DeadLetter{Source: source, Reason: triad.Clip(reason), ReceivedAt: receivedAt.UnixMilli(), Deliveries: deliveries, Original: m.Data})
	if err == nil {
		dl := nats.NewMsg(a.names.DeadLetter(source))
		dl.Header.Set(triad.ProtocolHeader, triad.ProtocolVersion)
		dl.Data = data
		_, err = a.js.PublishMsg(dl)
	}
	if err != nil {
		// Not acknowledged: the request comes back after the ack wait and is tried again.
		a.log.Printf("dead letter for %s not stored (%v): %s", m.Subject, err, reason)
		return
	}
	a.log.Printf("dead-lettered a request on %s: %s", m.Subject, reason)
	a.ack(m, "dead-lettered request")
}

func (a *agent) ack(m *nats.Msg, label string) {
	if err := m.AckSync(); err != nil {
		a.log.Printf("%s: acknowledging failed (%v); the request may come back, which is harmless", label, err)
	}
}
