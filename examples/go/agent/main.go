// Command agent is a Triad agent written in Go from docs/protocol.md alone: it serves the example's
// fraud screening (POST <FRAUD_URL>/apply {idempotencyKey, action: "screen", payload: {orderId, amount}},
// and POST /undo for a compensation) for one agent type, speaking only NATS.
//
//	NATS_URL=nats://127.0.0.1:4222 TRIAD_NAMESPACE=default FRAUD_URL=http://127.0.0.1:7104 agent [-agent fraud]
//
// Its circuit breaker (breaker.go) reads TRIAD_BREAKER_THRESHOLD (default 5) and
// TRIAD_BREAKER_HALF_OPEN_MS (default 5000), as the TypeScript example's agents do.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"triadgo/triad"
)

// ackWait is the consumer's ack wait the protocol prescribes (§8.1).
const ackWait = 5 * time.Second

type agent struct {
	nc        *nats.Conn
	js        nats.JetStreamContext
	names     triad.Names
	agentType string
	agentID   string
	ackWait   time.Duration
	service   *service
	breaker   *breaker
	log       *log.Logger
	held      holding
}

func env(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

func main() {
	agentType := flag.String("agent", "fraud", "the agent type served: requests arrive on triad.<ns>.step.<agent>, results go to triad.<ns>.result.<agent>")
	concurrency := flag.Int("concurrency", 16, "how many step requests run at once")
	grace := flag.Duration("grace", 4*time.Second, "on SIGTERM or SIGINT, how long the steps in flight may take to finish before they are handed back")
	flag.Parse()
	logger := log.New(os.Stderr, "", log.LstdFlags|log.Lmicroseconds)
	natsURL := env("NATS_URL", "nats://127.0.0.1:4222")
	namespace := env("TRIAD_NAMESPACE", "default")
	serviceURL := env("FRAUD_URL", "http://127.0.0.1:7104")
	for _, err := range []error{triad.CheckName("-agent", *agentType), triad.CheckNamespace(namespace)} {
		if err != nil {
			logger.Printf("cannot start: %v", err)
			os.Exit(2)
		}
	}
	if *concurrency < 1 {
		logger.Printf("cannot start: -concurrency must be at least 1 (got %d)", *concurrency)
		os.Exit(2)
	}
	threshold, err := breakerSetting(os.Getenv, "TRIAD_BREAKER_THRESHOLD", defaultBreakerThreshold)
	if err != nil {
		logger.Printf("cannot start: %v", err)
		os.Exit(2)
	}
	halfOpenMs, err := breakerSetting(os.Getenv, "TRIAD_BREAKER_HALF_OPEN_MS", int(defaultBreakerHalfOpen/time.Millisecond))
	if err != nil {
		logger.Printf("cannot start: %v", err)
		os.Exit(2)
	}
	host, _ := os.Hostname()
	a := &agent{
		names:     triad.Names{NS: namespace},
		agentType: *agentType,
		agentID:   fmt.Sprintf("go-%s-%s-%d", *agentType, host, os.Getpid()),
		service:   &service{baseURL: serviceURL, http: &http.Client{}},
		breaker:   newBreaker(threshold, time.Duration(halfOpenMs)*time.Millisecond, logger),
		log:       logger,
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := a.serve(ctx, natsURL, *concurrency, *grace); err != nil {
		logger.Printf("agent %s stopped: %v", a.agentID, err)
		os.Exit(1)
	}
}

// serve connects, pulls step requests until ctx ends, then lets the steps in flight finish (up to grace).
func (a *agent) serve(ctx context.Context, natsURL string, concurrency int, grace time.Duration) error {
	auth, err := triad.ConnectOptions(os.Getenv)
	if err != nil {
		return err
	}
	nc, err := nats.Connect(natsURL, append([]nats.Option{
		nats.Name("triad-go-agent-" + a.agentType),
		// An agent identity may subscribe only under its own inbox prefix (decision 0016).
		nats.CustomInboxPrefix(a.names.AgentInbox(a.agentType)),
		nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { a.log.Printf("disconnected from NATS: %v", err) }),
		nats.ReconnectHandler(func(c *nats.Conn) { a.log.Printf("reconnected to NATS at %s", c.ConnectedUrl()) }),
	}, auth...)...)
	if err != nil {
		return fmt.Errorf("connecting to NATS at %s: %w (set NATS_URL)", natsURL, err)
	}
	defer nc.Close()
	a.nc = nc
	if a.js, err = nc.JetStream(); err != nil {
		return err
	}
	sub, err := a.subscribe(ctx)
	if err != nil {
		return err
	}
	if sub == nil { // stopped before the stream appeared
		return nil
	}
	probes, err := a.answerProbes()
	if err != nil {
		return fmt.Errorf("subscribing to %s: %w", a.names.Probe(a.agentType), err)
	}
	defer func() { _ = probes.Unsubscribe() }()
	a.log.Printf("go agent ready: %s serving agent type %s in namespace %s (consumer agent-%s, ack wait %s), calling %s (circuit breaker: opens after %d failures, half-opens after %s)",
		a.agentID, a.agentType, a.names.NS, a.agentType, a.ackWait, a.service.baseURL, a.breaker.threshold, a.breaker.halfOpenAfter)

	// run ends only when the grace period is over: steps in flight then stop and are handed back.
	run, abandon := context.WithCancel(context.Background())
	defer abandon()
	var wg sync.WaitGroup
	slots := make(chan struct{}, concurrency)
	freed := make(chan struct{}, 1)
	for ctx.Err() == nil {
		free := cap(slots) - len(slots)
		if free == 0 {
			select {
			case <-freed:
			case <-ctx.Done():
			}
			continue
		}
		msgs, err := sub.Fetch(free, nats.MaxWait(time.Second))
		if err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			a.log.Printf("pulling step requests: %v (trying again)", err)
			time.Sleep(500 * time.Millisecond)
		}
		for _, m := range msgs {
			slots <- struct{}{}
			wg.Add(1)
			go func(m *nats.Msg) {
				defer func() {
					<-slots
					select {
					case freed <- struct{}{}:
					default:
					}
					wg.Done()
				}()
				a.handle(run, m)
			}(m)
		}
	}

	a.log.Printf("stopping: no new requests; %d in flight may finish within %s", len(slots), grace)
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(grace):
		abandon()
		<-finished
	}
	if err := nc.Flush(); err != nil {
		a.log.Printf("flushing before exit: %v", err)
	}
	a.log.Printf("agent %s stopped", a.agentID)
	return nil
}

// subscribe binds to the durable consumer agent-<type> on the STEPS stream, creating it when it does not
// exist (§8.1). The streams are the schedulers' to create: until one has, it waits.
func (a *agent) subscribe(ctx context.Context) (*nats.Subscription, error) {
	stream := a.names.StepsStream()
	durable := "agent-" + a.agentType
	filter := a.names.Step(a.agentType)
	waiting := false
	for {
		info, err := a.js.ConsumerInfo(stream, durable)
		if err == nil {
			if info.Config.FilterSubject != filter {
				return nil, fmt.Errorf("consumer %s on stream %s filters %q, not %q: delete it or fix its configuration", durable, stream, info.Config.FilterSubject, filter)
			}
			a.ackWait = info.Config.AckWait
			return a.js.PullSubscribe(filter, durable, nats.Bind(stream, durable))
		}
		if errors.Is(err, nats.ErrConsumerNotFound) {
			_, err = a.js.AddConsumer(stream, &nats.ConsumerConfig{
				Durable:       durable,
				AckPolicy:     nats.AckExplicitPolicy,
				DeliverPolicy: nats.DeliverAllPolicy,
				FilterSubject: filter,
				AckWait:       ackWait,
			})
			if err == nil || errors.Is(err, nats.ErrConsumerNameAlreadyInUse) {
				continue // created (by us or by another agent at the same moment): bind to it
			}
		}
		if !waiting {
			waiting = true
			a.log.Printf("waiting for stream %s and consumer %s (%v); a scheduler creates the streams", stream, durable, err)
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(500 * time.Millisecond):
		}
	}
}
