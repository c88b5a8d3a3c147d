package client

import (
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// idGenerator makes UNIQ_KEYs and holds the client's random source.
//
// A UNIQ_KEY here is 16 bytes written as 32 upper-case hex digits:
//
//	| off | size | field                                         |
//	|   0 |    8 | random, drawn once per Client                 |
//	|   8 |    8 | counter, starting at a random value           |
//
// Keys of one Client never repeat (the counter would need 2^64 messages);
// keys of two Clients collide only if 64 random bits and the counter ranges
// coincide. The broker deduplicates by UNIQ_KEY, so a collision would drop
// a message: uniqueness matters more than RocketMQ's embedded timestamp,
// which nothing in raftmq reads.
type idGenerator struct {
	prefix [16]byte // hex of bytes 0..7
	ctr    atomic.Uint64

	mu  sync.Mutex
	rnd *rand.Rand // guarded by mu
}

const upperHex = "0123456789ABCDEF"

func newIDGenerator() (*idGenerator, error) {
	var seed [8 + 32 + 8]byte
	if _, err := crand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("client: read random seed: %w", err)
	}
	g := &idGenerator{}
	for i, b := range seed[:8] {
		g.prefix[2*i] = upperHex[b>>4]
		g.prefix[2*i+1] = upperHex[b&0x0F]
	}
	g.ctr.Store(binary.BigEndian.Uint64(seed[40:]))
	g.rnd = rand.New(rand.NewChaCha8([32]byte(seed[8:40])))
	return g, nil
}

// next returns a fresh UNIQ_KEY.
func (g *idGenerator) next() string {
	n := g.ctr.Add(1)
	var out [32]byte
	copy(out[:], g.prefix[:])
	for i := 31; i >= 16; i-- {
		out[i] = upperHex[n&0x0F]
		n >>= 4
	}
	return string(out[:])
}

// jitter returns a random value in [0, n); n must be > 0.
func (g *idGenerator) jitter(n int64) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.rnd.Int64N(n)
}
