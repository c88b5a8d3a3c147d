package interop

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// TestMeasureFailoverRoutes measures what failover routes cost RocketMQ's
// Go client: SendSync throughput with 8 senders for 5 s against a fresh
// group with --failover-routes on and off, alternating, three rounds
// each (this VM drifts; compare within a round). A measurement, not a
// check: it runs only with INTEROP_MEASURE=1 and logs its figures.
func TestMeasureFailoverRoutes(t *testing.T) {
	if os.Getenv("INTEROP_MEASURE") == "" {
		t.Skip("a measurement: set INTEROP_MEASURE=1")
	}
	for round := 1; round <= 3; round++ {
		for _, on := range []bool{true, false} {
			t.Run(fmt.Sprintf("round%d-failover-%v", round, on), func(t *testing.T) {
				g := startGroup(t, fmt.Sprintf("--failover-routes=%v", on))
				topic := uniq("measure")
				g.createTopic(t, topic, 8)
				p := newProducer(t, g)
				sendSync(t, p, primitive.NewMessage(topic, []byte("warm-up")))
				var n, failed atomic.Int64
				deadline := time.Now().Add(5 * time.Second)
				var wg sync.WaitGroup
				body := make([]byte, 1024)
				for range 8 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for time.Now().Before(deadline) {
							if _, err := p.SendSync(context.Background(), primitive.NewMessage(topic, body)); err != nil {
								failed.Add(1)
							} else {
								n.Add(1)
							}
						}
					}()
				}
				wg.Wait()
				t.Logf("failover routes %v: %d sends/s (%d failed)", on, n.Load()/5, failed.Load())
			})
		}
	}
}
