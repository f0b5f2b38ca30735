// Command client submits one task to Triad and follows it to its end, written in Go from
// docs/protocol.md alone. It prints every event; it exits 0 only if the task completed, 1 if it ended
// otherwise (the reason printed), 2 on bad options.
//
//	NATS_URL=nats://127.0.0.1:4222 TRIAD_NAMESPACE=default client -order-id o1 -amount 42
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
	"github.com/vmihailenco/msgpack/v5"

	"triadgo/triad"
)

func env(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

type options struct {
	natsURL, namespace, client, workflow, taskID string
	input                                        interface{}
	timeout                                      time.Duration
	jsonOut                                      bool
	// signal: sent (once) when a step starts waiting for it, with signalData as its data (§6 task.signal).
	signal     string
	signalData interface{}
	// outputDir: where the finished task's outputs stored as objects are downloaded (<step>.msgpack).
	outputDir string
}

func parseOptions() (options, error) {
	o := options{natsURL: env("NATS_URL", "nats://127.0.0.1:4222"), namespace: env("TRIAD_NAMESPACE", "default")}
	flag.StringVar(&o.client, "client", env("TRIAD_CLIENT_ID", "default"), "the client identity: submissions go to triad.<ns>.submit.<client>")
	flag.StringVar(&o.workflow, "workflow", "orders", "the workflow to run")
	flag.StringVar(&o.taskID, "task-id", "", "the task id (default: a new unique one)")
	orderID := flag.String("order-id", "", "the order's id (default: the task id)")
	amount := flag.Float64("amount", 42, "the order's amount")
	inputJSON := flag.String("input", "", "the task input as JSON (instead of -order-id and -amount)")
	inputFile := flag.String("input-file", "", "a file holding the task input as JSON (above TRIAD_INLINE_MAX_BYTES it is uploaded and sent as a reference)")
	flag.StringVar(&o.outputDir, "output-dir", "", "download every step output stored as an object into this folder (<step>.msgpack) once the task ends")
	flag.DurationVar(&o.timeout, "timeout", 60*time.Second, "how long to wait for the task to end")
	flag.BoolVar(&o.jsonOut, "json", false, "print each event as a JSON line")
	flag.StringVar(&o.signal, "signal", "", "send this signal when a step of the task starts waiting for it")
	signalJSON := flag.String("signal-data", "", "the signal's data as JSON (with -signal)")
	flag.Parse()
	if o.signal != "" {
		if err := triad.CheckName("-signal", o.signal); err != nil {
			return o, err
		}
	}
	if *signalJSON != "" {
		dec := json.NewDecoder(strings.NewReader(*signalJSON))
		dec.UseNumber()
		if err := dec.Decode(&o.signalData); err != nil {
			return o, fmt.Errorf("-signal-data is not valid JSON: %v", err)
		}
		o.signalData = triad.PlainJSON(o.signalData)
	}
	if o.taskID == "" {
		o.taskID = "go-" + strings.ToLower(nuid.Next())
	}
	for _, err := range []error{triad.CheckNamespace(o.namespace), triad.CheckName("-client", o.client), triad.CheckName("-workflow", o.workflow), triad.CheckTaskID(o.taskID)} {
		if err != nil {
			return o, err
		}
	}
	if *inputFile != "" {
		text, err := os.ReadFile(*inputFile)
		if err != nil {
			return o, fmt.Errorf("-input-file: %v", err)
		}
		inputJSON = new(string)
		*inputJSON = string(text)
	}
	if *inputJSON != "" {
		dec := json.NewDecoder(strings.NewReader(*inputJSON))
		dec.UseNumber()
		if err := dec.Decode(&o.input); err != nil {
			return o, fmt.Errorf("-input is not valid JSON: %v", err)
		}
		o.input = triad.PlainJSON(o.input)
	} else {
		id := *orderID
		if id == "" {
			id = o.taskID
		}
		var a interface{} = *amount
		if *amount == float64(int64(*amount)) {
			a = int64(*amount) // a whole amount travels as a msgpack integer (§1)
		}
		o.input = map[string]interface{}{"orderId": id, "amount": a}
	}
	return o, nil
}

func main() {
	o, err := parseOptions()
	if err != nil {
		fmt.Fprintf(os.Stderr, "client: %v\n", err)
		os.Exit(2)
	}
	status, err := run(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "client: %v\n", err)
		os.Exit(1)
	}
	if o.outputDir != "" {
		if err := downloadOutputs(o); err != nil {
			fmt.Fprintf(os.Stderr, "client: downloading the outputs: %v\n", err)
			os.Exit(1)
		}
	}
	if status != "completed" {
		os.Exit(1)
	}
}

// run submits the task and follows its events until one ends it; it returns the task's final status.
func run(o options) (string, error) {
	names := triad.Names{NS: o.namespace}
	// Replies and JetStream acknowledgements come to the client's own inbox (§3).
	auth, err := triad.ConnectOptions(os.Getenv)
	if err != nil {
		return "", err
	}
	nc, err := nats.Connect(o.natsURL, append([]nats.Option{nats.Name("triad-go-client-" + o.client), nats.CustomInboxPrefix(names.Inbox(o.client))}, auth...)...)
	if err != nil {
		return "", fmt.Errorf("connecting to NATS at %s: %w (set NATS_URL)", o.natsURL, err)
	}
	defer nc.Close()
	js, err := nc.JetStream()
	if err != nil {
		return "", err
	}

	// Both live event sources are open before the submission, so nothing published after it is missed:
	// the private reply subject and the task's event subject (§5). The stored history (a task id
	// submitted before) is read once the submission is in.
	batches := make(chan []byte, 256)
	forward := func(m *nats.Msg) { batches <- m.Data }
	replyTo := nc.NewInbox()
	replySub, err := nc.Subscribe(replyTo, forward)
	if err != nil {
		return "", err
	}
	defer replySub.Unsubscribe()
	eventSub, err := nc.Subscribe(names.Event(o.client, o.taskID), forward)
	if err != nil {
		return "", err
	}
	defer eventSub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		return "", err
	}

	// Above the inline threshold the input is uploaded through the schedulers first (§12).
	input, err := triad.Offload(o.input, "input", func(data []byte) (*triad.ObjectRef, error) {
		return triad.UploadInput(nc, names, o.client, o.taskID, data)
	})
	if err != nil {
		return "", err
	}
	sub := triad.Submission{TaskID: o.taskID, Workflow: o.workflow, Input: input, ReplyTo: replyTo, SubmittedAt: time.Now().UnixMilli()}
	data, err := msgpack.Marshal(&sub)
	if err != nil {
		return "", err
	}
	msg := nats.NewMsg(names.Submit(o.client))
	msg.Header.Set(triad.ProtocolHeader, triad.ProtocolVersion)
	msg.Header.Set(triad.MsgIDHeader, o.client+":"+o.taskID) // a resubmission is dropped (§4)
	msg.Header.Set(triad.ReplyToHeader, replyTo)
	msg.Data = data
	if _, err := js.PublishMsg(msg); err != nil {
		if errors.Is(err, nats.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
			return "", fmt.Errorf("submitting on %s: no stream takes it (%v): is a scheduler running in namespace %q?", msg.Subject, err, o.namespace)
		}
		return "", fmt.Errorf("submitting on %s: %w", msg.Subject, err)
	}
	fmt.Printf("submitted task %s (workflow %s) as client %s\n", o.taskID, o.workflow, o.client)
	go func() {
		if err := readHistory(nc, names, o.client, o.taskID, batches); err != nil {
			fmt.Fprintf(os.Stderr, "client: not reading the stored events (%v); following the live ones only\n", err)
		}
	}()

	// Events are printed in seq order, each once, whichever source brought it first.
	var next int64 = 1
	pending := map[int64]triad.TaskEvent{}
	deadline := time.After(o.timeout)
	// Events are history sent without JetStream's acknowledgement: a NATS failover can lose one, and a
	// gap in the seqs would hold every later event back. The task's state is the truth: read it now and
	// then while the task has not ended (§5).
	check := time.NewTicker(2 * time.Second)
	defer check.Stop()
	endedBeforeEvents := false
	for {
		var data []byte
		select {
		case data = <-batches:
		case <-check.C:
			status, seq, err := taskStatus(nc, names, o.client, o.taskID)
			if err != nil || !triad.TerminalEvents[status] {
				endedBeforeEvents = false
				continue
			}
			if !endedBeforeEvents { // its last events may be on their way: one more tick for them
				endedBeforeEvents = true
				continue
			}
			fmt.Fprintf(os.Stderr, "client: task %s ended (seq %d) with events up to %d shown: the rest were lost\n", o.taskID, seq, next-1)
			fmt.Printf("task %s %s\n", o.taskID, status)
			return status, nil
		case <-deadline:
			return "", fmt.Errorf("task %s did not end within %s (last event seq %d)", o.taskID, o.timeout, next-1)
		}
		events, err := triad.ParseEventBatch(data)
		if err != nil {
			fmt.Fprintf(os.Stderr, "client: ignoring an unreadable event message: %v\n", err)
			continue
		}
		sort.Slice(events, func(i, j int) bool { return events[i].Seq < events[j].Seq })
		for _, e := range events {
			if e.TaskID != o.taskID {
				continue
			}
			if e.Type == "rejected" { // seq 0: no task was created
				printEvent(o, e)
				return "rejected", fmt.Errorf("task %s was rejected: %s", o.taskID, describeRejection(e))
			}
			if e.Seq >= next {
				pending[e.Seq] = e
			}
		}
		for {
			e, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			next++
			printEvent(o, e)
			if e.Type == "step_waiting" && o.signal != "" && e.Signal == o.signal {
				if err := sendSignal(nc, names, o, e.Step); err != nil {
					return "", err
				}
			}
			if !triad.TerminalEvents[e.Type] {
				continue
			}
			// An operator may retry an ended task; it then goes on with higher seqs (§5).
			status, seq, err := taskStatus(nc, names, o.client, o.taskID)
			if err == nil && seq > e.Seq {
				continue
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "client: task.get: %v\n", err)
				status = e.Type
			}
			fmt.Printf("task %s %s\n", o.taskID, status)
			return status, nil
		}
	}
}

func describeRejection(e triad.TaskEvent) string {
	reason := e.Reason
	if code, ok := e.Error["code"].(string); ok {
		reason = code + ": " + reason
	}
	if details, ok := e.Error["details"].([]interface{}); ok && len(details) > 0 {
		reason += fmt.Sprintf(" %v", details)
	}
	return reason
}

func printEvent(o options, e triad.TaskEvent) {
	if o.jsonOut {
		line, _ := json.Marshal(map[string]interface{}{
			"taskId": e.TaskID, "seq": e.Seq, "type": e.Type, "at": e.At, "status": e.Status,
			"step": e.Step, "attempt": e.Attempt, "reason": e.Reason,
		})
		fmt.Println(string(line))
		return
	}
	line := fmt.Sprintf("event %d %s", e.Seq, e.Type)
	if e.Step != "" {
		line += fmt.Sprintf(" step=%s attempt=%d", e.Step, e.Attempt)
	}
	if e.Status != "" {
		line += " status=" + e.Status
	}
	if e.Reason != "" {
		line += fmt.Sprintf(" reason=%q", e.Reason)
	}
	fmt.Println(line)
}

// sendSignal sends the signal the options name to the task (§6 task.signal), on the client's own subject:
// a client may signal only its own tasks. A new signal id each time; resending the same id would be harmless.
func sendSignal(nc *nats.Conn, names triad.Names, o options, step string) error {
	q := map[string]interface{}{"taskId": o.taskID, "name": o.signal, "signalId": "go-" + strings.ToLower(nuid.Next())}
	if o.signalData != nil {
		q["data"] = o.signalData
	}
	body, err := msgpack.Marshal(q)
	if err != nil {
		return err
	}
	req := nats.NewMsg(names.ClientAPI(o.client, "task.signal"))
	req.Header.Set(triad.ProtocolHeader, triad.ProtocolVersion)
	req.Data = body
	reply, err := nc.RequestMsg(req, 5*time.Second)
	if err != nil {
		return fmt.Errorf("signal %s: %w", o.signal, err)
	}
	value, err := triad.ParseAPIReply(reply.Data)
	if err != nil {
		return fmt.Errorf("signal %s: %w", o.signal, err)
	}
	f := triad.NewFields(value, "value.")
	outcome := f.String("outcome", true, nil)
	if err := f.Err(); err != nil {
		return err
	}
	fmt.Printf("signal %s %s (step %s waited for it)\n", o.signal, outcome, step)
	return nil
}

// downloadOutputs writes every step output of the task that is stored as an object into o.outputDir as
// <step>.msgpack (the msgpack value), downloaded through the schedulers (payload.get, §12).
func downloadOutputs(o options) error {
	names := triad.Names{NS: o.namespace}
	auth, err := triad.ConnectOptions(os.Getenv)
	if err != nil {
		return err
	}
	nc, err := nats.Connect(o.natsURL, append([]nats.Option{nats.Name("triad-go-client-" + o.client), nats.CustomInboxPrefix(names.Inbox(o.client))}, auth...)...)
	if err != nil {
		return err
	}
	defer nc.Close()
	body, _ := msgpack.Marshal(map[string]interface{}{"taskId": o.taskID})
	req := nats.NewMsg(names.ClientAPI(o.client, "task.get"))
	req.Header.Set(triad.ProtocolHeader, triad.ProtocolVersion)
	req.Data = body
	reply, err := nc.RequestMsg(req, 10*time.Second)
	if err != nil {
		return err
	}
	value, err := triad.ParseAPIReply(reply.Data)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.outputDir, 0o755); err != nil {
		return err
	}
	steps, _ := value["steps"].([]interface{})
	for _, s := range steps {
		step, _ := s.(map[string]interface{})
		// A fan-out step's output is its elements' outputs: each may be a reference (<step>#<i>).
		outputs := map[string]interface{}{fmt.Sprint(step["name"]): step["output"]}
		if list, isList := step["output"].([]interface{}); isList {
			outputs = map[string]interface{}{}
			for i, e := range list {
				outputs[fmt.Sprintf("%v#%d", step["name"], i)] = e
			}
		}
		for name, output := range outputs {
			ref, isRef, err := triad.RefOf(output)
			if err != nil {
				return err
			}
			if !isRef {
				continue
			}
			data, err := triad.Download(nc, names, o.client, ref)
			if err != nil {
				return err
			}
			path := fmt.Sprintf("%s/%s.msgpack", o.outputDir, name)
			if err := os.WriteFile(path, data, 0o644); err != nil {
				return err
			}
			fmt.Printf("output of step %s: %d bytes (sha256 %s) written to %s\n", name, len(data), ref.SHA256, path)
		}
	}
	return nil
}

// taskStatus asks the API for the task's status and current seq (§6 task.get), on the client's own
// subject: the task is this client's, and a client identity may read no other.
func taskStatus(nc *nats.Conn, names triad.Names, client, taskID string) (string, int64, error) {
	body, err := msgpack.Marshal(map[string]interface{}{"taskId": taskID})
	if err != nil {
		return "", 0, err
	}
	req := nats.NewMsg(names.ClientAPI(client, "task.get"))
	req.Header.Set(triad.ProtocolHeader, triad.ProtocolVersion)
	req.Data = body
	reply, err := nc.RequestMsg(req, 5*time.Second)
	if err != nil {
		return "", 0, err
	}
	value, err := triad.ParseAPIReply(reply.Data)
	if err != nil {
		return "", 0, err
	}
	f := triad.NewFields(value, "value.")
	status := f.String("status", true, nil)
	seq := f.Int("seq", true, 0)
	return status, seq, f.Err()
}

// readHistory asks a scheduler for the task's stored events (§5, `task.events` on the client's own
// subject: a client identity uses no JetStream consumer), page by page, and hands each page to `batches`
// as one event batch. Events de-duplicate by seq, so those that also come live are printed once.
func readHistory(nc *nats.Conn, names triad.Names, client, taskID string, batches chan<- []byte) error {
	from := int64(1)
	for {
		q := map[string]interface{}{"taskId": taskID}
		if from > 1 {
			q["from"] = from
		}
		body, err := msgpack.Marshal(q)
		if err != nil {
			return err
		}
		req := nats.NewMsg(names.ClientAPI(client, "task.events"))
		req.Header.Set(triad.ProtocolHeader, triad.ProtocolVersion)
		req.Data = body
		reply, err := nc.RequestMsg(req, 5*time.Second)
		if err != nil {
			return err
		}
		value, err := triad.ParseAPIReply(reply.Data)
		if err != nil {
			return err
		}
		f := triad.NewFields(value, "value.")
		next := f.Int("next", true, 1)
		more := f.Bool("more", true)
		if err := f.Err(); err != nil {
			return err
		}
		if events, _ := value["events"].([]interface{}); len(events) > 0 {
			data, err := msgpack.Marshal(map[string]interface{}{"taskId": taskID, "events": events})
			if err != nil {
				return err
			}
			batches <- data
		}
		if !more {
			return nil
		}
		from = next
	}
}
