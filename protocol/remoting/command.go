package remoting

import "strconv"

// SerializeType is the header encoding of a frame, the top byte of the
// header length field.
type SerializeType byte

// Serialize types (RocketMQ's SerializeType). Part of the wire format.
const (
	SerializeJSON     SerializeType = 0
	SerializeRocketMQ SerializeType = 1
)

// String returns "JSON", "ROCKETMQ" or the number.
func (t SerializeType) String() string {
	switch t {
	case SerializeJSON:
		return "JSON"
	case SerializeRocketMQ:
		return "ROCKETMQ"
	}
	return "SerializeType(" + strconv.Itoa(int(t)) + ")"
}

// Flag bits of Command.Flag.
const (
	// FlagResponse marks a response (RocketMQ's RPC_TYPE bit).
	FlagResponse int32 = 1 // bit 0
	// FlagOneway marks a request that must not be answered (RPC_ONEWAY).
	FlagOneway int32 = 2 // bit 1
)

// DefaultMaxFrame is the largest frame length (the value of the length
// prefix) accepted when Server.MaxFrame or Options.MaxFrame is 0: RocketMQ's
// default com.rocketmq.remoting.frameMaxLength.
const DefaultMaxFrame = 16 << 20

// Version is the remoting version raftmq sends in every command it creates:
// the ordinal of RocketMQ's MQVersion V5_3_3. Clients compare a HEART_BEAT
// response's version with 232 (V4_1_0_SNAPSHOT) before they use SQL92, and
// an Apache name server sends standard JSON to requests of version >= 401.
const Version int32 = 479

// LanguageCode is the byte a ROCKETMQ binary header carries for the
// sender's language (RocketMQ's LanguageCode ordinal). A JSON header carries
// the name instead; Command.Language always holds the name.
type LanguageCode byte

// Language codes. Part of the wire format.
const (
	LanguageJava   LanguageCode = 0
	LanguageCPP    LanguageCode = 1
	LanguageDotNet LanguageCode = 2
	LanguagePython LanguageCode = 3
	LanguageDelphi LanguageCode = 4
	LanguageErlang LanguageCode = 5
	LanguageRuby   LanguageCode = 6
	LanguageOther  LanguageCode = 7
	LanguageHTTP   LanguageCode = 8
	LanguageGo     LanguageCode = 9
	LanguagePHP    LanguageCode = 10
	LanguageOMS    LanguageCode = 11
	LanguageRust   LanguageCode = 12
	LanguageNodeJS LanguageCode = 13
)

// String returns the language name as a JSON header carries it ("JAVA",
// "GO", ...), or "OTHER" for a code RocketMQ does not define.
func (l LanguageCode) String() string {
	switch l {
	case LanguageJava:
		return "JAVA"
	case LanguageCPP:
		return "CPP"
	case LanguageDotNet:
		return "DOTNET"
	case LanguagePython:
		return "PYTHON"
	case LanguageDelphi:
		return "DELPHI"
	case LanguageErlang:
		return "ERLANG"
	case LanguageRuby:
		return "RUBY"
	case LanguageHTTP:
		return "HTTP"
	case LanguageGo:
		return "GO"
	case LanguagePHP:
		return "PHP"
	case LanguageOMS:
		return "OMS"
	case LanguageRust:
		return "RUST"
	case LanguageNodeJS:
		return "NODE_JS"
	}
	return "OTHER"
}

// ParseLanguage returns the code of a language name, or LanguageOther for a
// name RocketMQ does not define. Names are matched exactly (upper case).
func ParseLanguage(name string) LanguageCode {
	switch name {
	case "JAVA":
		return LanguageJava
	case "CPP":
		return LanguageCPP
	case "DOTNET":
		return LanguageDotNet
	case "PYTHON":
		return LanguagePython
	case "DELPHI":
		return LanguageDelphi
	case "ERLANG":
		return LanguageErlang
	case "RUBY":
		return LanguageRuby
	case "HTTP":
		return LanguageHTTP
	case "GO":
		return LanguageGo
	case "PHP":
		return LanguagePHP
	case "OMS":
		return LanguageOMS
	case "RUST":
		return LanguageRust
	case "NODE_JS":
		return LanguageNodeJS
	}
	return LanguageOther
}

// Command is one request or response, decoded. Field order follows the
// header.
type Command struct {
	// Code is the request code of a request and the response code of a
	// response. The binary header carries it as int16.
	Code int32
	// Language is the sender's language name ("GO", "JAVA", ...). A binary
	// header carries a LanguageCode; unknown codes decode to "OTHER" and
	// unknown names encode as LanguageOther.
	Language string
	// Version is the sender's MQVersion ordinal (int16 in the binary
	// header).
	Version int32
	// Opaque is the request id; a response carries its request's.
	Opaque int32
	// Flag holds FlagResponse and FlagOneway.
	Flag int32
	// Remark is the error text of a response. Null and empty are the same.
	Remark string
	// ExtFields holds the command's custom header, every value a string.
	// A decoded command without ext fields has nil.
	ExtFields map[string]string
	// Header, used when ExtFields is nil, supplies the ext fields at encode
	// time: a ROCKETMQ binary frame gets them without a map being built
	// (the send path's headers); a JSON one through a map as usual.
	Header HeaderEncoder
	// Body is the rest of the frame. A decoded Body aliases the frame
	// buffer; it is nil when the frame has no body.
	Body []byte
	// Serialize is the header encoding the command was decoded from, and
	// the one AppendFrame uses.
	Serialize SerializeType

	// held is, for a request a server connection read, its frame length
	// until its answer is written: the bytes it counts in flight. Taken
	// with atomic.SwapInt64.
	held int64
}

// HeaderEncoder is a typed header that encodes its own ext fields;
// SendMessageRequestHeader.V2 and *SendMessageResponseHeader are ones.
type HeaderEncoder interface{ encodeExt(w *extWriter) }

// typedHeader reports whether the ext fields come from Header.
func (c *Command) typedHeader() bool { return c.ExtFields == nil && c.Header != nil }

// IsResponse reports whether FlagResponse is set.
func (c *Command) IsResponse() bool { return c.Flag&FlagResponse != 0 }

// IsOneway reports whether FlagOneway is set.
func (c *Command) IsOneway() bool { return c.Flag&FlagOneway != 0 }

// NewRequest returns a request with language "GO", version Version and a
// JSON header. ext and body are used, not copied. Conn.Invoke assigns the
// opaque.
func NewRequest(code int32, ext map[string]string, body []byte) *Command {
	return &Command{
		Code:      code,
		Language:  LanguageGo.String(),
		Version:   Version,
		ExtFields: ext,
		Body:      body,
		Serialize: SerializeJSON,
	}
}

// NewResponse returns the response to req: the same opaque and
// serialization, FlagResponse set, language "GO", version Version, and the
// given code and remark.
func NewResponse(req *Command, code int32, remark string) *Command {
	return &Command{
		Code:      code,
		Language:  LanguageGo.String(),
		Version:   Version,
		Opaque:    req.Opaque,
		Flag:      FlagResponse,
		Remark:    remark,
		Serialize: req.Serialize,
	}
}

// NewNotSupportedResponse returns the REQUEST_CODE_NOT_SUPPORTED response
// to req, with the remark the Java server uses.
func NewNotSupportedResponse(req *Command) *Command {
	return NewResponse(req, RequestCodeNotSupported,
		" request type "+strconv.Itoa(int(req.Code))+" not supported")
}
