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
// Every connection, on either side, has one reader goroutine and one writer
// goroutine. Senders encode a frame in their own goroutine and queue the
// bytes on a channel; the writer copies queued frames into a bufio.Writer
// and flushes when the queue is empty, so a burst goes out in few writes.
// The reader decodes frames, completes pending requests by opaque, and
// starts one goroutine per incoming request (Server.Handler on a server,
// Options.OnRequest on a client), so a held long poll does not delay later
// requests on the same connection. When a connection dies the reader fails
// every pending request with an error wrapping ErrConnClosed.
package remoting
