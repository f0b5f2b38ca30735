package triad

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Step kinds (§8).
const (
	KindRun        = "run"
	KindCompensate = "compensate"
)

// RetryPolicy is a step's policy for the agent's own retries inside the complete-by window.
type RetryPolicy struct {
	MaxAttempts    int64
	InitialDelayMs int64
	MaxDelayMs     int64
}

// StepRequest is what a scheduler sends an agent (§8.2, docs/protocol/step-request.schema.json).
type StepRequest struct {
	TaskID         string
	Workflow       string
	Version        int64
	Step           string
	Agent          string
	Kind           string
	Attempt        int64
	IdempotencyKey string
	CompleteBy     int64
	Input          interface{}
	Needs          map[string]interface{}
	Retry          *RetryPolicy
	DispatchedAt   int64
	Undoes         string
	Effect         string
	// Item is set for an element of a fan-out (forEach) step: the element this request is for (§8.2).
	Item *Item
	// Bucket is the object store bucket of the task's client: an output above the inline threshold is
	// stored there and sent as a reference (§12).
	Bucket string
}

// Item is a fan-out element: its 0-based index, how many elements the list has, and its value (nil when
// absent). The result must echo Index (StepResult.Item) and name it in its message id (ResultMsgID).
type Item struct {
	Index int64
	Count int64
	Value interface{}
}

// CompleteByTime is the request's complete-by as a time.
func (r *StepRequest) CompleteByTime() time.Time { return time.UnixMilli(r.CompleteBy) }

// ParseStepRequest decodes and validates a step request; the error lists every problem by field.
func ParseStepRequest(data []byte) (*StepRequest, error) {
	m, err := Decode(data)
	if err != nil {
		return nil, err
	}
	f := NewFields(m, "")
	name := func(what string) func(string) error { return func(s string) error { return CheckName(what, s) } }
	r := &StepRequest{
		TaskID:         f.String("taskId", true, CheckTaskID),
		Workflow:       f.String("workflow", true, name("workflow")),
		Version:        f.Int("version", true, 1),
		Step:           f.String("step", true, name("step")),
		Agent:          f.String("agent", true, name("agent")),
		Kind:           f.Enum("kind", true, KindRun, KindCompensate),
		Attempt:        f.Int("attempt", true, 1),
		IdempotencyKey: f.String("idempotencyKey", true, Length(1, 512)),
		CompleteBy:     f.Millis("completeBy", true),
		Input:          f.Raw("input"),
		Needs:          f.Map("needs", true),
		DispatchedAt:   f.Millis("dispatchedAt", true),
		Undoes:         f.String("undoes", false, Length(1, 512)),
		Effect:         f.Enum("effect", false, "applied", "unknown"),
		Bucket:         f.String("bucket", false, Length(1, 120)),
	}
	if item := f.Map("item", false); item != nil {
		itf := NewFields(item, "item.")
		r.Item = &Item{Index: itf.Int("index", true, 0), Count: itf.Int("count", true, 1), Value: itf.Raw("value")}
		if r.Item.Index >= r.Item.Count && len(itf.Problems) == 0 {
			itf.Problems = append(itf.Problems, fmt.Sprintf("item.index: %d is not below item.count %d", r.Item.Index, r.Item.Count))
		}
		f.Problems = append(f.Problems, itf.Problems...)
	}
	if retry := f.Map("retry", false); retry != nil {
		rf := NewFields(retry, "retry.")
		r.Retry = &RetryPolicy{
			MaxAttempts:    rf.Int("maxAttempts", true, 1),
			InitialDelayMs: rf.Int("initialDelayMs", true, 1),
			MaxDelayMs:     rf.Int("maxDelayMs", true, 1),
		}
		f.Problems = append(f.Problems, rf.Problems...)
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	return r, nil
}

// ProbeRequest asks which agent instance holds an attempt (docs/protocol/probe-request.schema.json).
type ProbeRequest struct {
	TaskID  string
	Step    string
	Kind    string
	Attempt int64
	Item    *int64
}

// ParseProbeRequest decodes and validates a probe.
func ParseProbeRequest(data []byte) (*ProbeRequest, error) {
	m, err := Decode(data)
	if err != nil {
		return nil, err
	}
	f := NewFields(m, "")
	r := &ProbeRequest{
		TaskID:  f.String("taskId", true, CheckTaskID),
		Step:    f.String("step", true, func(s string) error { return CheckName("step", s) }),
		Kind:    f.Enum("kind", true, KindRun, KindCompensate),
		Attempt: f.Int("attempt", true, 1),
	}
	if _, ok := m["item"]; ok {
		i := f.Int("item", true, 0)
		r.Item = &i
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	return r, nil
}

// ProbeReply is the holding instance's answer (docs/protocol/probe-reply.schema.json).
type ProbeReply struct {
	TaskID    string `msgpack:"taskId"`
	Step      string `msgpack:"step"`
	Kind      string `msgpack:"kind"`
	Attempt   int64  `msgpack:"attempt"`
	Item      *int64 `msgpack:"item,omitempty"`
	AgentID   string `msgpack:"agentId"`
	Since     int64  `msgpack:"since"`
	Try       int64  `msgpack:"try"`
	State     string `msgpack:"state"`
	NextTryAt int64  `msgpack:"nextTryAt,omitempty"`
}

// StepError is a failed attempt's error (§8.7).
type StepError struct {
	Message     string `msgpack:"message"`
	Retryable   bool   `msgpack:"retryable"`
	Name        string `msgpack:"name,omitempty"`
	CircuitOpen bool   `msgpack:"circuitOpen,omitempty"`
	// Throttled: the service refused the call and asked for time (429, or 503 with Retry-After;
	// decision 0020 §5): the step is put back after RetryAfterMs without counting a failure.
	Throttled    bool  `msgpack:"throttled,omitempty"`
	RetryAfterMs int64 `msgpack:"retryAfterMs,omitempty"`
	// Effect is "none" when certainly no call took effect, else "unknown".
	Effect string `msgpack:"effect,omitempty"`
}

// StepResult is an agent's report of one attempt (§8.7, docs/protocol/step-result.schema.json).
type StepResult struct {
	TaskID     string      `msgpack:"taskId"`
	Step       string      `msgpack:"step"`
	Kind       string      `msgpack:"kind"`
	Attempt    int64       `msgpack:"attempt"`
	AgentID    string      `msgpack:"agentId"`
	FinishedAt int64       `msgpack:"finishedAt"`
	Tries      int64       `msgpack:"tries"`
	OK         bool        `msgpack:"ok"`
	Output     interface{} `msgpack:"output,omitempty"`
	Error      *StepError  `msgpack:"error,omitempty"`
	// Item echoes the request's item.index for a fan-out element (nil otherwise).
	Item *int64 `msgpack:"item,omitempty"`
}

// DeadLetter is a message a consumer could not handle, with the reason (§7).
type DeadLetter struct {
	Source     string `msgpack:"source"`
	Reason     string `msgpack:"reason"`
	ReceivedAt int64  `msgpack:"receivedAt"`
	Deliveries int64  `msgpack:"deliveries"`
	Original   []byte `msgpack:"original"`
}

// Submission asks a scheduler to run a task (§4, docs/protocol/submission.schema.json).
type Submission struct {
	TaskID      string      `msgpack:"taskId"`
	Workflow    string      `msgpack:"workflow"`
	Version     int64       `msgpack:"version,omitempty"`
	Input       interface{} `msgpack:"input,omitempty"`
	ReplyTo     string      `msgpack:"replyTo,omitempty"`
	SubmittedAt int64       `msgpack:"submittedAt"`
}

// TaskEvent is one event of a task (§5).
type TaskEvent struct {
	TaskID  string
	Seq     int64
	Type    string
	At      int64
	Status  string
	Step    string
	Attempt int64
	Reason  string
	Error   map[string]interface{}
	// Signal: the signal a waitFor step waits for, or that was received (step_waiting, signal_received).
	Signal string
	// Until: what a waiting step waits until (epoch ms): a sleep's wake time, a wait's timeout.
	Until int64
}

// TerminalEvents end a task's story (§5).
var TerminalEvents = map[string]bool{
	"rejected": true, "completed": true, "failed": true, "compensated": true, "compensation_failed": true, "cancelled": true,
}

// ParseEventBatch decodes one transition's events: `{ taskId, events: [event, …] }`. Event types this
// program does not know are kept (informational, §9).
func ParseEventBatch(data []byte) ([]TaskEvent, error) {
	m, err := Decode(data)
	if err != nil {
		return nil, err
	}
	f := NewFields(m, "")
	f.String("taskId", true, nil)
	raw, ok := m["events"].([]interface{})
	if !ok || len(raw) == 0 {
		f.Problems = append(f.Problems, "events: expected a non-empty array")
	}
	events := make([]TaskEvent, 0, len(raw))
	for i, item := range raw {
		em, isMap := item.(map[string]interface{})
		if !isMap {
			f.Problems = append(f.Problems, "events."+strconv.Itoa(i)+": expected a map")
			continue
		}
		ef := NewFields(em, "events."+strconv.Itoa(i)+".")
		e := TaskEvent{
			TaskID:  ef.String("taskId", true, nil),
			Seq:     ef.Int("seq", true, 0),
			Type:    ef.String("type", true, nil),
			At:      ef.Millis("at", true),
			Status:  ef.String("status", false, nil),
			Step:    ef.String("step", false, nil),
			Attempt: ef.Int("attempt", false, 1),
			Reason:  ef.String("reason", false, nil),
			Error:   ef.Map("error", false),
			Signal:  ef.String("signal", false, nil),
			Until:   ef.Int("until", false, 0),
		}
		f.Problems = append(f.Problems, ef.Problems...)
		events = append(events, e)
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	return events, nil
}

// ParseAPIReply reads the answer to an API request (§6): the value, or an error with its code and message.
func ParseAPIReply(data []byte) (map[string]interface{}, error) {
	m, err := Decode(data)
	if err != nil {
		return nil, err
	}
	f := NewFields(m, "")
	if f.Bool("ok", true) {
		v, _ := m["value"].(map[string]interface{})
		return v, f.Err()
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	ef := NewFields(f.Map("error", true), "error.")
	code := ef.String("code", false, nil)
	msg := ef.String("message", false, nil)
	return nil, errors.New(code + ": " + msg)
}
