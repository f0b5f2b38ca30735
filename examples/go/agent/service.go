package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"triadgo/triad"
)

// service calls the remote service a step wraps, over its HTTP API: POST /apply
// {idempotencyKey, action, payload} and POST /undo {idempotencyKey, of}; the service applies an
// effect once per idempotency key.
type service struct {
	baseURL string
	http    *http.Client
}

// callError is a failed call, classified the way the protocol's results need it (§8.5, §8.7).
type callError struct {
	msg       string
	permanent bool // retrying the same request cannot help
	// notApplied: the call certainly took no effect (the service refused it or said so, or the
	// connection was refused), so an undo may skip the step.
	notApplied bool
	// throttled: the service asked for time (429, or 503 with Retry-After): the attempt ends at once
	// and reports throttled with retryAfterMs (decision 0020 §5.3).
	throttled    bool
	retryAfterMs int64
}

// Retry-After bounds (decision 0020 §5.1): 1 s for a 429 without one, at most an hour.
const (
	defaultRetryAfterMs = 1000
	maxRetryAfterMs     = 3600000
)

// parseRetryAfter reads a Retry-After value (RFC 9110 §10.2.3): delay-seconds or an HTTP-date, as ms
// from now; a past date is 0; capped at an hour. ok is false for an absent or unreadable value.
func parseRetryAfter(value string, now time.Time) (ms int64, ok bool) {
	v := strings.TrimSpace(value)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 && !strings.HasPrefix(v, "+") {
		if n > maxRetryAfterMs/1000 {
			return maxRetryAfterMs, true
		}
		return n * 1000, true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	ms = at.Sub(now).Milliseconds()
	if ms < 0 {
		ms = 0
	}
	if ms > maxRetryAfterMs {
		ms = maxRetryAfterMs
	}
	return ms, true
}

func (e *callError) Error() string { return e.msg }

// call POSTs body to path and returns the decoded JSON answer. ctx ends the call at complete-by.
// 4xx: refused, permanent, not applied. 503: unavailable, nothing applied, retryable. A refused
// connection: retryable, not applied. Anything else (a timeout, a reset, another 5xx, an unreadable
// answer): retryable, effect unknown.
func (s *service) call(ctx context.Context, path string, body interface{}) (map[string]interface{}, error) {
	payload, err := json.Marshal(body)
	if err != nil {
		return nil, &callError{msg: fmt.Sprintf("cannot encode the request to %s as JSON: %v", path, err), permanent: true, notApplied: true}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.baseURL+path, bytes.NewReader(payload))
	if err != nil {
		return nil, &callError{msg: fmt.Sprintf("bad service URL %q: %v", s.baseURL, err), permanent: true, notApplied: true}
	}
	req.Header.Set("content-type", "application/json")
	res, err := s.http.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil, &callError{msg: fmt.Sprintf("%s%s: connection refused (nothing listening)", s.baseURL, path), notApplied: true}
		}
		return nil, &callError{msg: fmt.Sprintf("%s%s: %v", s.baseURL, path, err)}
	}
	defer res.Body.Close()
	text, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return nil, &callError{msg: fmt.Sprintf("%s%s: reading the answer: %v", s.baseURL, path, err)}
	}
	answer := strings.TrimSpace(string(text))
	// A throttle before the 4xx rule: a 429 (1 s without a usable Retry-After), or a 503 with one.
	if res.StatusCode == http.StatusTooManyRequests || res.StatusCode == http.StatusServiceUnavailable {
		after, ok := parseRetryAfter(res.Header.Get("Retry-After"), time.Now())
		if ok || res.StatusCode == http.StatusTooManyRequests {
			if !ok {
				after = defaultRetryAfterMs
			}
			return nil, &callError{msg: fmt.Sprintf("%s%s throttled the call (%d, Retry-After %q): %s", s.baseURL, path, res.StatusCode, res.Header.Get("Retry-After"), answer), notApplied: true, throttled: true, retryAfterMs: after}
		}
	}
	switch {
	case res.StatusCode >= 400 && res.StatusCode < 500:
		return nil, &callError{msg: fmt.Sprintf("%s%s refused the request (%d): %s", s.baseURL, path, res.StatusCode, answer), permanent: true, notApplied: true}
	case res.StatusCode == http.StatusServiceUnavailable:
		return nil, &callError{msg: fmt.Sprintf("%s%s is unavailable (503): %s", s.baseURL, path, answer), notApplied: true}
	case res.StatusCode < 200 || res.StatusCode > 299:
		return nil, &callError{msg: fmt.Sprintf("%s%s failed (%d): %s", s.baseURL, path, res.StatusCode, answer)}
	}
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var out map[string]interface{}
	if err := dec.Decode(&out); err != nil {
		return nil, &callError{msg: fmt.Sprintf("%s%s answered %d with a body that is not a JSON object: %s", s.baseURL, path, res.StatusCode, answer)}
	}
	return triad.PlainJSON(out).(map[string]interface{}), nil
}
