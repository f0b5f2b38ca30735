package triad

// Large payloads (docs/protocol.md §12): a payload whose msgpack encoding is above the inline threshold
// travels as an object reference to an object in the JetStream object store bucket of the task's client.
// Agents read objects with STREAM.MSG.GET (no consumer) and write them with nats.go's object store;
// clients, whose NATS account has no JetStream, upload and download through the schedulers
// (payload.put, payload.get).

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
	"github.com/vmihailenco/msgpack/v5"
)

// DefaultInlineMaxBytes: above it (TRIAD_INLINE_MAX_BYTES) a payload goes to the object store.
const DefaultInlineMaxBytes = 262_144

// MaxObjectBytes: the largest object this example writes or reads (TRIAD_MAX_OBJECT_BYTES' default).
const MaxObjectBytes = 64 * 1024 * 1024

// chunkBytes: one part of an upload, one chunk of an object.
const chunkBytes = 128 * 1024

// ReservedKey marks Triad's values; user data may not contain it in any map.
const ReservedKey = "$triad"

// InlineMaxBytes is TRIAD_INLINE_MAX_BYTES, or the default.
func InlineMaxBytes() int {
	if n, err := strconv.Atoi(os.Getenv("TRIAD_INLINE_MAX_BYTES")); err == nil && n >= 1024 {
		return n
	}
	return DefaultInlineMaxBytes
}

// ObjectRef is a reference, its fields in the protocol's order ($triad first).
type ObjectRef struct {
	Triad  string `msgpack:"$triad"`
	V      int64  `msgpack:"v"`
	Bucket string `msgpack:"bucket"`
	Name   string `msgpack:"name"`
	Size   int64  `msgpack:"size"`
	SHA256 string `msgpack:"sha256"`
}

// RefOf is the reference a decoded value is, if it is one (a map holding $triad: "object").
func RefOf(v interface{}) (*ObjectRef, bool, error) {
	m, ok := v.(map[string]interface{})
	if !ok {
		return nil, false, nil
	}
	t, has := m[ReservedKey]
	if !has {
		return nil, false, nil
	}
	if t != "object" {
		return nil, true, fmt.Errorf("unknown Triad value %q: this reader is older than its writer", fmt.Sprint(t))
	}
	f := NewFields(m, "reference.")
	r := &ObjectRef{Triad: "object", V: f.Int("v", true, 1), Bucket: f.String("bucket", true, Length(1, 120)), Name: f.String("name", true, Length(1, 400)), Size: f.Int("size", true, 0), SHA256: f.String("sha256", true, Length(64, 64))}
	return r, true, f.Err()
}

// ReservedKeyPath says where a user value holds the reserved key ("" when it does not).
func ReservedKeyPath(v interface{}, path string) string {
	switch x := v.(type) {
	case map[string]interface{}:
		if _, has := x[ReservedKey]; has {
			return path
		}
		for k, e := range x {
			if p := ReservedKeyPath(e, path+"."+k); p != "" {
				return p
			}
		}
	case []interface{}:
		for i, e := range x {
			if p := ReservedKeyPath(e, fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
	}
	return ""
}

// ResolveRefs replaces every reference in v, at any depth, by the value stored in its object.
func ResolveRefs(v interface{}, read func(*ObjectRef) ([]byte, error)) (interface{}, error) {
	ref, isTriad, err := RefOf(v)
	if err != nil {
		return nil, err
	}
	if isTriad {
		data, err := read(ref)
		if err != nil {
			return nil, err
		}
		var out interface{}
		if err := msgpack.Unmarshal(data, &out); err != nil {
			return nil, fmt.Errorf("object %s is not msgpack: %w", ref.Name, err)
		}
		return out, nil
	}
	switch x := v.(type) {
	case map[string]interface{}:
		for k, e := range x {
			r, err := ResolveRefs(e, read)
			if err != nil {
				return nil, err
			}
			x[k] = r
		}
	case []interface{}:
		for i, e := range x {
			r, err := ResolveRefs(e, read)
			if err != nil {
				return nil, err
			}
			x[i] = r
		}
	}
	return v, nil
}

// check verifies downloaded bytes against the reference: size, then SHA-256.
func check(ref *ObjectRef, data []byte) error {
	if int64(len(data)) != ref.Size {
		return fmt.Errorf("object %s is corrupt or was replaced (%d bytes, the reference says %d)", ref.Name, len(data), ref.Size)
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != ref.SHA256 {
		return fmt.Errorf("object %s is corrupt or was replaced (sha256 mismatch)", ref.Name)
	}
	return nil
}

// msgGet asks JetStream for one stored message of stream (STREAM.MSG.GET, JSON body): its data and sequence.
func msgGet(nc *nats.Conn, stream string, req map[string]interface{}) ([]byte, uint64, error) {
	body, _ := json.Marshal(req)
	reply, err := nc.Request("$JS.API.STREAM.MSG.GET."+stream, body, 10*time.Second)
	if err != nil {
		return nil, 0, err
	}
	var r struct {
		Message *struct {
			Seq  uint64 `json:"seq"`
			Data []byte `json:"data"`
		} `json:"message"`
		Error *struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(reply.Data, &r); err != nil {
		return nil, 0, err
	}
	if r.Error != nil {
		return nil, 0, fmt.Errorf("%s: %s", stream, r.Error.Description)
	}
	if r.Message == nil {
		return nil, 0, fmt.Errorf("%s: no message", stream)
	}
	return r.Message.Data, r.Message.Seq, nil
}

// ReadObject downloads the object a reference points to from the object store (an agent's way), checked.
func ReadObject(nc *nats.Conn, ref *ObjectRef) ([]byte, error) {
	if ref.Size > MaxObjectBytes {
		return nil, fmt.Errorf("object %s is %d bytes, above this agent's limit of %d", ref.Name, ref.Size, MaxObjectBytes)
	}
	stream := "OBJ_" + ref.Bucket
	meta, _, err := msgGet(nc, stream, map[string]interface{}{"last_by_subj": "$O." + ref.Bucket + ".M." + base64.URLEncoding.EncodeToString([]byte(ref.Name))})
	if err != nil {
		return nil, fmt.Errorf("object %s: %w", ref.Name, err)
	}
	var info struct {
		NUID    string `json:"nuid"`
		Deleted bool   `json:"deleted"`
	}
	if err := json.Unmarshal(meta, &info); err != nil || info.Deleted {
		return nil, fmt.Errorf("object %s is not in bucket %s (deleted or never stored)", ref.Name, ref.Bucket)
	}
	var out bytes.Buffer
	seq := uint64(1)
	for int64(out.Len()) < ref.Size {
		data, at, err := msgGet(nc, stream, map[string]interface{}{"seq": seq, "next_by_subj": "$O." + ref.Bucket + ".C." + info.NUID})
		if err != nil {
			return nil, fmt.Errorf("object %s: %w", ref.Name, err)
		}
		out.Write(data)
		seq = at + 1
	}
	return out.Bytes(), check(ref, out.Bytes())
}

// Offload is what a writer sends for a value: the value itself when its encoding is at most the threshold,
// else the reference `store` returns for the encoded bytes.
func Offload(v interface{}, what string, store func([]byte) (*ObjectRef, error)) (interface{}, error) {
	if p := ReservedKeyPath(v, what); p != "" {
		return nil, fmt.Errorf("%s has the reserved key %q: rename it", p, ReservedKey)
	}
	data, err := msgpack.Marshal(v)
	if err != nil {
		return nil, err
	}
	if len(data) <= InlineMaxBytes() {
		return v, nil
	}
	return store(data)
}

// PutObject stores data in bucket under name with nats.go's object store (an agent's way).
func PutObject(js nats.JetStreamContext, bucket, name string, data []byte) (*ObjectRef, error) {
	obs, err := js.ObjectStore(bucket)
	if err != nil {
		return nil, fmt.Errorf("object store bucket %s: %w", bucket, err)
	}
	if _, err := obs.PutBytes(name, data); err != nil {
		return nil, fmt.Errorf("storing object %s in %s: %w", name, bucket, err)
	}
	sum := sha256.Sum256(data)
	return &ObjectRef{Triad: "object", V: 1, Bucket: bucket, Name: name, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}, nil
}

// apiRequest sends one API request on the client's own subject and returns the reply's value.
func apiRequest(nc *nats.Conn, names Names, client, op string, body interface{}) (map[string]interface{}, error) {
	data, err := msgpack.Marshal(body)
	if err != nil {
		return nil, err
	}
	req := nats.NewMsg(names.ClientAPI(client, op))
	req.Header.Set(ProtocolHeader, ProtocolVersion)
	req.Data = data
	reply, err := nc.RequestMsg(req, 10*time.Second)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return ParseAPIReply(reply.Data)
}

// UploadInput uploads a task input's encoded bytes through the schedulers (payload.put) into the
// client's bucket, part by part; the reference to submit as the input (a client's way).
func UploadInput(nc *nats.Conn, names Names, client, taskID string, data []byte) (*ObjectRef, error) {
	if len(data) > MaxObjectBytes {
		return nil, fmt.Errorf("the input is %d bytes; at most %d", len(data), MaxObjectBytes)
	}
	upload := nuid.Next()
	parts := (len(data) + chunkBytes - 1) / chunkBytes
	if parts == 0 {
		parts = 1
	}
	sum := sha256.Sum256(data)
	for part := 0; part < parts; part++ {
		end := (part + 1) * chunkBytes
		if end > len(data) {
			end = len(data)
		}
		body := map[string]interface{}{"taskId": taskID, "upload": upload, "part": part, "data": data[part*chunkBytes : end]}
		if part == parts-1 {
			body["last"] = map[string]interface{}{"parts": parts, "size": len(data), "sha256": hex.EncodeToString(sum[:])}
		}
		value, err := apiRequest(nc, names, client, "payload.put", body)
		if err != nil {
			return nil, err
		}
		if part == parts-1 {
			ref, isRef, err := RefOf(value["ref"])
			if err != nil || !isRef {
				return nil, fmt.Errorf("payload.put: the last part's reply holds no reference (%v)", err)
			}
			return ref, nil
		}
	}
	return nil, fmt.Errorf("unreachable")
}

// Download reads an object through the schedulers (payload.get), checked (a client's way).
func Download(nc *nats.Conn, names Names, client string, ref *ObjectRef) ([]byte, error) {
	var out bytes.Buffer
	q := map[string]interface{}{"bucket": ref.Bucket, "name": ref.Name}
	for {
		value, err := apiRequest(nc, names, client, "payload.get", q)
		if err != nil {
			return nil, err
		}
		chunk, _ := value["data"].([]byte)
		out.Write(chunk)
		if int64(out.Len()) >= ref.Size {
			break
		}
		f := NewFields(value, "value.")
		q = map[string]interface{}{"bucket": ref.Bucket, "name": ref.Name, "nuid": f.String("nuid", true, nil), "from": f.Int("next", true, 1)}
		if err := f.Err(); err != nil {
			return nil, err
		}
	}
	return out.Bytes(), check(ref, out.Bytes())
}
