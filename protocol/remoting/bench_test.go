package remoting

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"
)

// BenchmarkInvokeAsync1KiB pipelines SEND_MESSAGE requests with a 1 KiB
// body and a Go-client-sized header over one connection to an echo server
// (the response carries the body back), at most `window` in flight.
// req/s is the number of request/response pairs per second; cpu-µs/req
// the CPU time (client and server) each costs.
func BenchmarkInvokeAsync1KiB(b *testing.B) {
	for _, st := range []SerializeType{SerializeJSON, SerializeRocketMQ} {
		b.Run(st.String(), func(b *testing.B) { benchInvokeAsync(b, st, 1<<10) })
	}
}

func benchInvokeAsync(b *testing.B, st SerializeType, size int) {
	const window = 256
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &Server{Handler: echo}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	c, err := Dial(context.Background(), ln.Addr().String(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()

	h := sampleSendHeader()
	ext := h.Encode()
	body := make([]byte, size)
	slots := make(chan struct{}, window)
	var wg sync.WaitGroup
	cb := func(resp *Command, err error) {
		if err != nil {
			b.Error(err)
		} else if len(resp.Body) != size {
			b.Errorf("echoed %d bytes", len(resp.Body))
		}
		<-slots
		wg.Done()
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	cpu0 := processCPU()
	for b.Loop() {
		slots <- struct{}{}
		wg.Add(1)
		req := NewRequest(SendMessage, ext, body)
		req.Serialize = st
		if err := c.InvokeAsync(req, 10*time.Second, cb); err != nil {
			b.Fatal(err)
		}
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	if cpu := processCPU() - cpu0; cpu > 0 {
		// CPU per request, client and server together: unlike req/s, it
		// hardly depends on what else runs on the machine.
		b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-µs/req")
	}
}

// BenchmarkInvoke measures one synchronous round trip at a time.
func BenchmarkInvoke(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &Server{Handler: echo}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	c, err := Dial(context.Background(), ln.Addr().String(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	b.ReportAllocs()
	cpu0 := processCPU()
	for b.Loop() {
		if _, err := c.Invoke(ctx, NewRequest(HeartBeat, nil, nil)); err != nil {
			b.Fatal(err)
		}
	}
	if cpu := processCPU() - cpu0; cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-µs/req")
	}
}

// Codec alone: the send header of a Go client, 1 KiB body.
func BenchmarkAppendFrame(b *testing.B) {
	for _, st := range []SerializeType{SerializeJSON, SerializeRocketMQ} {
		b.Run(st.String(), func(b *testing.B) {
			h := sampleSendHeader()
			c := NewRequest(SendMessage, h.Encode(), make([]byte, 1<<10))
			c.Serialize = st
			buf, _ := AppendFrame(nil, c)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				buf, _ = AppendFrame(buf[:0], c)
			}
		})
	}
}

func BenchmarkDecodeFrame(b *testing.B) {
	for _, st := range []SerializeType{SerializeJSON, SerializeRocketMQ} {
		b.Run(st.String(), func(b *testing.B) {
			h := sampleSendHeader()
			c := NewRequest(SendMessage, h.Encode(), make([]byte, 1<<10))
			c.Serialize = st
			frame := encodeFrame(b, c)
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := DecodeFrame(frame); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecodeSendHeader(b *testing.B) {
	h := sampleSendHeader()
	ext := h.Encode()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeSendMessageRequestHeader(SendMessage, ext); err != nil {
			b.Fatal(err)
		}
	}
}
