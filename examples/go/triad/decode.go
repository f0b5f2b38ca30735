package triad

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"
)

// timestampExt is msgpack's timestamp extension: the only one a reader accepts, as epoch milliseconds (§1).
const timestampExt = -1

// Decode reads a message body: msgpack of one map with string keys, at most MaxMessageBytes long and
// MaxNesting deep, with no extension type but the timestamp. It says what was wrong otherwise.
func Decode(data []byte) (map[string]interface{}, error) {
	if len(data) > MaxMessageBytes {
		return nil, fmt.Errorf("message is %d bytes, more than the %d allowed", len(data), MaxMessageBytes)
	}
	if err := checkEncoding(data); err != nil {
		return nil, fmt.Errorf("not valid msgpack: %w", err)
	}
	var v interface{}
	dec := msgpack.NewDecoder(bytes.NewReader(data))
	v, err := dec.DecodeInterface()
	if err != nil {
		return nil, fmt.Errorf("not valid msgpack: %w", err)
	}
	m, ok := v.(map[string]interface{})
	if !ok {
		return nil, fmt.Errorf("the message is a msgpack %s, not a map with string keys", kindOf(v))
	}
	return m, nil
}

// checkEncoding walks the msgpack bytes once: every value complete, nesting within MaxNesting, no
// extension type but the timestamp, nothing after the value. Done before decoding so a hostile
// message cannot make the decoder recurse a million levels deep.
func checkEncoding(b []byte) error {
	pos := 0
	// pending[i] = values still expected by the container open at depth i+1.
	pending := []int{}
	need := func(n int) error {
		if pos+n > len(b) {
			return errors.New("the message ends in the middle of a value")
		}
		return nil
	}
	length := func(size int) (int, error) {
		if err := need(size); err != nil {
			return 0, err
		}
		var n uint64
		switch size {
		case 1:
			n = uint64(b[pos])
		case 2:
			n = uint64(binary.BigEndian.Uint16(b[pos:]))
		case 4:
			n = uint64(binary.BigEndian.Uint32(b[pos:]))
		}
		pos += size
		if n > uint64(len(b)) {
			return 0, errors.New("a length runs past the end of the message")
		}
		return int(n), nil
	}
	for {
		if err := need(1); err != nil {
			return err
		}
		c := b[pos]
		pos++
		items := 0 // values this one opens (a container) — counted after the switch
		switch {
		case c <= 0x7f, c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3:
		case c >= 0x80 && c <= 0x8f:
			items = 2 * int(c&0x0f)
		case c >= 0x90 && c <= 0x9f:
			items = int(c & 0x0f)
		case c >= 0xa0 && c <= 0xbf:
			if err := need(int(c & 0x1f)); err != nil {
				return err
			}
			pos += int(c & 0x1f)
		case c == 0xcc || c == 0xd0:
			if err := need(1); err != nil {
				return err
			}
			pos++
		case c == 0xcd || c == 0xd1:
			if err := need(2); err != nil {
				return err
			}
			pos += 2
		case c == 0xca || c == 0xce || c == 0xd2:
			if err := need(4); err != nil {
				return err
			}
			pos += 4
		case c == 0xcb || c == 0xcf || c == 0xd3:
			if err := need(8); err != nil {
				return err
			}
			pos += 8
		case c == 0xc4 || c == 0xd9 || c == 0xc5 || c == 0xda || c == 0xc6 || c == 0xdb: // bin and str 8/16/32
			size := map[byte]int{0xc4: 1, 0xd9: 1, 0xc5: 2, 0xda: 2, 0xc6: 4, 0xdb: 4}[c]
			n, err := length(size)
			if err != nil {
				return err
			}
			if err := need(n); err != nil {
				return err
			}
			pos += n
		case c == 0xdc || c == 0xdd:
			n, err := length(map[byte]int{0xdc: 2, 0xdd: 4}[c])
			if err != nil {
				return err
			}
			items = n
		case c == 0xde || c == 0xdf:
			n, err := length(map[byte]int{0xde: 2, 0xdf: 4}[c])
			if err != nil {
				return err
			}
			items = 2 * n
		case c >= 0xd4 && c <= 0xd8, c >= 0xc7 && c <= 0xc9: // fixext and ext
			var n int
			if c >= 0xd4 && c <= 0xd8 {
				n = 1 << (c - 0xd4)
			} else {
				var err error
				if n, err = length(map[byte]int{0xc7: 1, 0xc8: 2, 0xc9: 4}[c]); err != nil {
					return err
				}
			}
			if err := need(1 + n); err != nil {
				return err
			}
			if t := int8(b[pos]); t != timestampExt {
				return fmt.Errorf("extension type %d is not allowed (only plain values, and the timestamp, type -1)", t)
			}
			pos += 1 + n
		default:
			return fmt.Errorf("byte 0x%02x at offset %d is not a msgpack type", c, pos-1)
		}
		if items > 0 {
			if len(pending) >= MaxNesting {
				return fmt.Errorf("maps and arrays nest more than %d levels", MaxNesting)
			}
			pending = append(pending, items)
			continue
		}
		// A complete value: close every container it completes.
		for len(pending) > 0 {
			pending[len(pending)-1]--
			if pending[len(pending)-1] > 0 {
				break
			}
			pending = pending[:len(pending)-1]
		}
		if len(pending) == 0 {
			if pos != len(b) {
				return fmt.Errorf("%d bytes follow the message's value", len(b)-pos)
			}
			return nil
		}
	}
}

func kindOf(v interface{}) string {
	switch v.(type) {
	case nil:
		return "nil"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []byte:
		return "bin"
	case []interface{}:
		return "array"
	case map[string]interface{}:
		return "map"
	case float32, float64:
		return "float"
	case time.Time:
		return "timestamp"
	}
	if _, ok := AsInt(v); ok {
		return "integer"
	}
	return fmt.Sprintf("%T", v)
}

// AsInt returns a msgpack integer of any encoding as an int64; a float is not an integer (§1).
func AsInt(v interface{}) (int64, bool) {
	switch n := v.(type) {
	case int8:
		return int64(n), true
	case int16:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case uint8:
		return int64(n), true
	case uint16:
		return int64(n), true
	case uint32:
		return int64(n), true
	case uint64:
		if n > math.MaxInt64 {
			return 0, false
		}
		return int64(n), true
	}
	return 0, false
}

// Fields reads a decoded map field by field, collecting every problem with the field's path, as the
// protocol's dead letters list them (`attempt: …`). Absent and nil both mean "not given" (§1); fields
// it is not asked about are ignored (§9).
type Fields struct {
	m        map[string]interface{}
	prefix   string
	Problems []string
}

// NewFields starts reading m; prefix names its place in the message ("" for the top, "retry." inside).
func NewFields(m map[string]interface{}, prefix string) *Fields {
	return &Fields{m: m, prefix: prefix}
}

func (f *Fields) problem(key, format string, args ...interface{}) {
	f.Problems = append(f.Problems, f.prefix+key+": "+fmt.Sprintf(format, args...))
}

func (f *Fields) value(key string, required bool) (interface{}, bool) {
	v, ok := f.m[key]
	if !ok || v == nil {
		if required {
			f.problem(key, "required")
		}
		return nil, false
	}
	return v, true
}

// Has reports whether key is given (present and not nil).
func (f *Fields) Has(key string) bool {
	v, ok := f.m[key]
	return ok && v != nil
}

// Raw returns key's value as decoded (nil when absent).
func (f *Fields) Raw(key string) interface{} { return f.m[key] }

// String reads a string field; check (may be nil) says what else is wrong with it.
func (f *Fields) String(key string, required bool, check func(string) error) string {
	v, ok := f.value(key, required)
	if !ok {
		return ""
	}
	s, isString := v.(string)
	if !isString {
		f.problem(key, "expected a string, got a %s", kindOf(v))
		return ""
	}
	if check != nil {
		if err := check(s); err != nil {
			f.problem(key, "%s", err)
		}
	}
	return s
}

// Int reads an integer field of at least min.
func (f *Fields) Int(key string, required bool, min int64) int64 {
	v, ok := f.value(key, required)
	if !ok {
		return 0
	}
	n, isInt := AsInt(v)
	if !isInt {
		f.problem(key, "expected an integer, got a %s", kindOf(v))
		return 0
	}
	if n < min {
		f.problem(key, "must be at least %d (got %d)", min, n)
	}
	return n
}

// Millis reads an epoch-millisecond timestamp: an integer, or a msgpack timestamp (read as its milliseconds).
func (f *Fields) Millis(key string, required bool) int64 {
	if v, ok := f.m[key].(time.Time); ok {
		return v.UnixMilli()
	}
	return f.Int(key, required, 0)
}

// Enum reads a string field that must be one of allowed.
func (f *Fields) Enum(key string, required bool, allowed ...string) string {
	return f.String(key, required, func(s string) error {
		for _, a := range allowed {
			if s == a {
				return nil
			}
		}
		return fmt.Errorf("expected one of %v, got %q", allowed, s)
	})
}

// Map reads a map field.
func (f *Fields) Map(key string, required bool) map[string]interface{} {
	v, ok := f.value(key, required)
	if !ok {
		return nil
	}
	m, isMap := v.(map[string]interface{})
	if !isMap {
		f.problem(key, "expected a map, got a %s", kindOf(v))
	}
	return m
}

// Bool reads a boolean field.
func (f *Fields) Bool(key string, required bool) bool {
	v, ok := f.value(key, required)
	if !ok {
		return false
	}
	b, isBool := v.(bool)
	if !isBool {
		f.problem(key, "expected a boolean, got a %s", kindOf(v))
	}
	return b
}

// Err joins the problems into one reason (at most 100 of them, as §7 lists), or returns nil.
func (f *Fields) Err() error {
	if len(f.Problems) == 0 {
		return nil
	}
	p := f.Problems
	if len(p) > 100 {
		p = append(p[:100:100], fmt.Sprintf("… and %d more", len(f.Problems)-100))
	}
	msg := ""
	for i, s := range p {
		if i > 0 {
			msg += "; "
		}
		msg += s
	}
	return errors.New(Clip(msg))
}

// Length checks a string's length in characters.
func Length(min, max int) func(string) error {
	return func(s string) error {
		if n := utf8.RuneCountInString(s); n < min || n > max {
			return fmt.Errorf("must be %d to %d characters long (got %d)", min, max, n)
		}
		return nil
	}
}
