// Package triad is what the Go examples need of Triad's wire protocol v1 (docs/protocol.md): the
// subjects and streams of a namespace, the headers, and the rules every message follows.
package triad

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

const (
	// ProtocolHeader carries the protocol's major version on every message (docs/protocol.md §2).
	ProtocolHeader = "Triad-Protocol"
	// ProtocolVersion is the major version these examples speak.
	ProtocolVersion = "1"
	// ReplyToHeader repeats a submission's reply subject, so a refusal of an unreadable body is still answered.
	ReplyToHeader = "Triad-Reply-To"
	// MsgIDHeader is JetStream's de-duplication header.
	MsgIDHeader = "Nats-Msg-Id"
	// MaxMessageBytes is the largest message Triad reads or writes (§1).
	MaxMessageBytes = 1_000_000
	// MaxNesting is how deep maps and arrays may nest (§1).
	MaxNesting = 128
	// MaxDeliveries is how many deliveries a consumer tries before it dead-letters a message (§7).
	MaxDeliveries = 20
	// MaxTextBytes bounds every reason and error message: the protocol allows 4,000 characters (§10);
	// as many bytes is never more characters than that, whatever the text.
	MaxTextBytes = 4_000
)

var (
	namePattern      = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)
	namespacePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,40}$`)
	taskIDPattern    = regexp.MustCompile(`^[A-Za-z0-9_:-]{1,128}$`)
)

// CheckName says what is wrong with a workflow, step, agent or client name, or returns nil.
func CheckName(what, v string) error {
	if !namePattern.MatchString(v) {
		return fmt.Errorf("%s %q is not a valid name: a letter, then up to 63 letters, digits, _ or - (%s)", what, v, namePattern)
	}
	return nil
}

// CheckNamespace says what is wrong with a namespace, or returns nil.
func CheckNamespace(v string) error {
	if !namespacePattern.MatchString(v) {
		return fmt.Errorf("namespace %q is not valid: 1 to 40 letters, digits, _ or - (%s)", v, namespacePattern)
	}
	return nil
}

// CheckTaskID says what is wrong with a task id, or returns nil.
func CheckTaskID(v string) error {
	if !taskIDPattern.MatchString(v) {
		return fmt.Errorf("task id %q is not valid: 1 to 128 letters, digits, _, : or - (%s)", v, taskIDPattern)
	}
	return nil
}

// SupportedVersion reports whether a Triad-Protocol header value is v1; an absent header means v1 (§2).
func SupportedVersion(header string) bool {
	v := strings.TrimSpace(header)
	return v == "" || v == ProtocolVersion || strings.HasPrefix(v, ProtocolVersion+".")
}

// Names are the subjects and streams of one namespace (§3).
type Names struct{ NS string }

func (n Names) Submit(client string) string { return "triad." + n.NS + ".submit." + client }
func (n Names) Step(agent string) string    { return "triad." + n.NS + ".step." + agent }
func (n Names) Result(agent string) string  { return "triad." + n.NS + ".result." + agent }
func (n Names) Event(client, taskID string) string {
	return "triad." + n.NS + ".event." + client + "." + taskID
}

// DeadLetter is the subject of a dead letter from source (`step.fraud` → `triad.<ns>.dlq.step_fraud`):
// the source is one subject token, its dots and wildcards written as `_` (§7).
func (n Names) DeadLetter(source string) string {
	return "triad." + n.NS + ".dlq." + strings.Map(func(r rune) rune {
		if r == '.' || r == '*' || r == '>' || unicode.IsSpace(r) {
			return '_'
		}
		return r
	}, source)
}
func (n Names) API(op string) string { return "triad." + n.NS + ".api." + op }

// Probe is where operators ask the instances of an agent type which of them holds an attempt (§3,
// decision 0021 §3.3); ProbedPrefix starts every reply subject an instance of that type may answer on.
func (n Names) Probe(agent string) string        { return "triad." + n.NS + ".probe." + agent }
func (n Names) ProbedPrefix(agent string) string { return "triad." + n.NS + ".probed." + agent + "." }

// ClientAPI is a client's own view of task.get or task.list (§6): the scheduler answers with that
// client's tasks only, and a client identity may publish only on its own.
func (n Names) ClientAPI(client, op string) string {
	return "triad." + n.NS + ".api.client." + client + "." + op
}

// Inbox is the prefix of the client's own inbox: reply subjects and JetStream acknowledgements live under it.
func (n Names) Inbox(client string) string { return "_INBOX." + n.NS + "." + client }

func (n Names) StepsStream() string  { return "TRIAD_" + n.NS + "_STEPS" }
func (n Names) EventsStream() string { return "TRIAD_" + n.NS + "_EVENTS" }

// ResultMsgID is the JetStream message id of a step attempt's result (§8.7); a fan-out element's
// (item non-nil) names it as <step>#<index>, so elements at the same attempt are not repeats of one another.
func ResultMsgID(taskID, step, kind string, attempt int64, item *int64) string {
	if item != nil {
		step = fmt.Sprintf("%s#%d", step, *item)
	}
	return fmt.Sprintf("%s:%s:%s:%d:result", taskID, step, kind, attempt)
}

// Clip shortens a text to at most MaxTextBytes bytes, cutting at a character boundary.
func Clip(s string) string {
	if len(s) <= MaxTextBytes {
		return s
	}
	cut := MaxTextBytes - len("…")
	for cut > 0 && (s[cut]&0xC0) == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
