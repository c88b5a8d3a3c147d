// Package remoting implements RocketMQ's TCP "remoting" protocol: the frame
// codec with both header serializations, a server that handles the
// requests of one connection concurrently, a client connection that
// multiplexes requests by opaque, and typed headers and bodies for the
// commands raftmq serves.
//
// # Frame
//
// All integers are big-endian and signed (Java). One frame is:
//
//	| off | size | field                                                    |
//	|   0 |    4 | frame length L = 4 + H + B (does not count itself)       |
//	|   4 |    1 | serialize type: 0 JSON, 1 ROCKETMQ                        |
//	|   5 |    3 | header length H (24 bits)                                 |
//	|   8 |    H | header, in the serialize type's encoding                  |
//	| 8+H |    B | body, B = L - 4 - H                                       |
//
// Bytes 4..7 are one int32, (type << 24) | H, as RocketMQ's
// markProtocolType writes them. DecodeFrame takes the frame without its
// length prefix (offset 4 onwards), which is what ReadFrame returns.
//
// # JSON header (serialize type 0)
//
// A UTF-8 JSON object. AppendFrame writes the keys in the order the Go
// client uses, without spaces, every ext field value a JSON string:
//
//	{"code":105,"language":"GO","version":479,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"T"}}
//
// DecodeFrame accepts the keys in any order, ignores unknown keys (Java
// adds "serializeTypeCurrentRPC"), accepts null or absent remark and
// extFields, and any language string.
//
// # ROCKETMQ binary header (serialize type 1)
//
//	| off   | size | field                                                |
//	|     0 |    2 | code (int16)                                         |
//	|     2 |    1 | language code (LanguageCode)                         |
//	|     3 |    2 | version (int16)                                      |
//	|     5 |    4 | opaque (int32)                                       |
//	|     9 |    4 | flag (int32)                                         |
//	|    13 |    4 | remark length R; 0 means empty                       |
//	|    17 |    R | remark, UTF-8                                        |
//	|  17+R |    4 | ext fields length E, in bytes                        |
//	|  21+R |    E | repeated: key length (int16), key, value length      |
//	|       |      | (int32), value                                       |
//
// The header length H must equal 21 + R + E exactly.
//
// # Requests and responses
//
// Flag bit 0 (FlagResponse) marks a response, bit 1 (FlagOneway) a request
// that must not be answered. A response carries the opaque of its request.
// Many requests share one connection; responses may come in any order.
//
// # Goroutines
//
// Every connection, on either side, has one reader goroutine for its whole
// life, and a writer goroutine only while it has frames to write. Senders
// (any goroutine) encode a frame in their own goroutine and queue it; at
// most 4096 frames wait, and a sender blocks beyond that. The sender that
// queues a frame when no writer runs starts one; the writer copies queued
// frames into a bufio.Writer, yields once, flushes when the queue is
// empty, and returns, so a burst goes out in few writes and at most one
// writer runs per connection. A client's Invoke that finds no writer
// running writes and flushes its request itself instead, bounded by its
// context's deadline (the connection's write deadline, cleared after); a
// write cut short closes the connection. The reader decodes frames, completes pending
// requests by opaque, and starts one goroutine per incoming request
// (Server.Handler on a server, Options.OnRequest on a client), so a held
// long poll does not delay later requests on the same connection. When a
// connection dies the reader waits for its writer and fails every pending
// request with an error wrapping ErrConnClosed.
//
// # Memory of a connection
//
// An idle connection holds no buffer: the reader takes a 32 KiB read
// buffer from a pool when a frame starts to arrive and returns it once it
// has consumed every byte it buffered, waiting for the next frame in a
// 512-byte buffer of its own (a frame longer than that takes one more
// read); the writer takes a 32 KiB bufio.Writer from a pool for a burst
// and returns it after the flush. The pools are the Server's, shared by
// its connections, and sync.Pools, so the garbage collector frees what
// connections stopped using. TestIdleConnectionMemory measures 500 idle
// plaintext connections, each after one round trip: about 2.8 KiB of heap
// (the link, its contexts and accounting, the socket, both ends' net.Conn)
// and the reader's stack, 4 or 8 KiB as the runtime's adaptive starting
// stack size decides, per connection; it was 99 KiB of heap and two
// goroutines. In a broker (raftmq broker, 2,000 connections, each after
// one heartbeat, HeapAlloc and StackInuse after GC) an idle connection
// holds 3.5 KiB of heap and 6 KiB of stacks, its reader's and the
// broker's goroutine watching a client's connection; it was 100 KiB and
// 8 KiB. A TLS connection also keeps crypto/tls's own buffers, which are
// not pooled and not measured here.
//
// # Resource limits
//
// A peer cannot make a connection hold memory it has not sent, nor keep
// it open by sending nothing. The server's limits are fields of Server;
// each is 0 for the default below and negative for no limit.
//
//	| limit               | default  | at the limit                                   |
//	| MaxFrame            | 16 MiB   | a longer length prefix closes the connection   |
//	|                     |          | at once, before any of the body is read        |
//	| ReadTimeout         | 30 s     | a frame started and not complete is closed     |
//	| IdleTimeout         | 120 s    | no frame started and no request in flight:     |
//	|                     |          | closed                                         |
//	| MaxConns            | 10000    | one more is accepted and closed at once        |
//	| MaxInflightRequests | 4096     | per connection: the reader stops until an      |
//	|                     |          | answer is written                              |
//	| MaxInflightBytes    | 64 MiB   | the same, for the frame bytes of those requests|
//	| Budget              | 512 MiB  | the same, for the bytes of every connection    |
//	|                     |          | sharing it (by default: the server's own)      |
//
// A frame body is allocated as it arrives: what is buffered already, at
// least 4 KiB, then doubled each time it is full and another byte has
// come, so a frame never holds more than twice what its peer sent,
// whatever length it announced. Those allocations are charged to the
// connection and its Budget as they are made; a frame that must wait for
// the Budget mid-way still has to finish within ReadTimeout.
//
// A request is in flight from the moment its frame is read until its
// response has been written to the socket (or its handler returned nil,
// or, for a request Server.Inline took, ServerConn.Reply was called). So a
// long-polled pull held by the server keeps its connection from being
// idle, and a client that sends without reading its answers is held back
// by TCP flow control once its answers fill the connection's queue. A
// connection at a limit is not read at all, responses to server-initiated
// requests included; the limits are far above what a RocketMQ client
// keeps in flight (one pull per queue, a few thousand asynchronous sends).
// When a connection closes, the bytes it held go back to its Budget.
//
// A client connection (Options) has only MaxFrame and ReadTimeout: a
// connection to a server may be idle, and its requests are its own.
//
// A connection closed for misbehaving (frame too large, malformed frame,
// read timeout, idle, too many connections) gets one Warn line
// "remoting: closing connection" with its address and the reason; at most
// 256 such lines a minute per client host and reason, the next one after
// a suppression saying how many were left out. Frames are never logged
// one by one.
package remoting
