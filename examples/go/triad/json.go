package triad

import "encoding/json"

// PlainJSON turns the json.Numbers of a value decoded with UseNumber into int64 when they are whole,
// else float64, so whole numbers travel as msgpack integers (§1).
func PlainJSON(v interface{}) interface{} {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]interface{}:
		for k, e := range x {
			x[k] = PlainJSON(e)
		}
		return x
	case []interface{}:
		for i, e := range x {
			x[i] = PlainJSON(e)
		}
		return x
	}
	return v
}
