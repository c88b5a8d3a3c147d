package remoting

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	require.NoError(t, err)
	return b
}

// vectorCommand is GET_ROUTEINFO_BY_TOPIC as the Go client sends it: the
// command of both test vectors in the protocol notes, §1.1.
func vectorCommand(st SerializeType) *Command {
	return &Command{
		Code:      GetRouteInfoByTopic,
		Language:  "GO",
		Version:   317,
		Opaque:    1,
		ExtFields: map[string]string{"topic": "T"},
		Serialize: st,
	}
}

// encodeFrame returns the frame of c without its length prefix, checking
// the prefix.
func encodeFrame(t testing.TB, c *Command) []byte {
	t.Helper()
	b, err := AppendFrame(nil, c)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(b), lenPrefixSize)
	require.Equal(t, uint32(len(b)-lenPrefixSize), binary.BigEndian.Uint32(b), "length prefix")
	return b[lenPrefixSize:]
}

func TestVectorJSON(t *testing.T) {
	const header = `{"code":105,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"T"}}`
	require.Len(t, header, 100)
	want := append(unhex(t, "00000068 00000064"), header...)

	got, err := AppendFrame(nil, vectorCommand(SerializeJSON))
	require.NoError(t, err)
	require.Equal(t, want, got)

	c, err := DecodeFrame(want[lenPrefixSize:])
	require.NoError(t, err)
	require.Equal(t, vectorCommand(SerializeJSON), c)
}

func TestVectorRocketMQ(t *testing.T) {
	want := unhex(t, "00000025 01000021 0069 09 013d 00000001 00000000 00000000 0000000c 0005 746f706963 00000001 54")

	got, err := AppendFrame(nil, vectorCommand(SerializeRocketMQ))
	require.NoError(t, err)
	require.Equal(t, want, got)

	c, err := DecodeFrame(want[lenPrefixSize:])
	require.NoError(t, err)
	require.Equal(t, vectorCommand(SerializeRocketMQ), c)
}

func TestAppendFrameAppends(t *testing.T) {
	prefix := []byte("xyz")
	b, err := AppendFrame(prefix, vectorCommand(SerializeRocketMQ))
	require.NoError(t, err)
	require.Equal(t, "xyz", string(b[:3]))
	c, err := DecodeFrame(b[3+lenPrefixSize:])
	require.NoError(t, err)
	require.Equal(t, vectorCommand(SerializeRocketMQ), c)
}

func roundTripCommands() []*Command {
	return []*Command{
		{Code: SendMessage, Language: "GO", Version: Version, Opaque: 7,
			ExtFields: map[string]string{"producerGroup": "pg", "topic": "T", "queueId": "3", "properties": "KEYS\x01k1\x02TAGS\x01a\x02"},
			Body:      []byte("hello body")},
		{Code: Success, Language: "JAVA", Version: 479, Opaque: -42, Flag: FlagResponse,
			Remark: "", ExtFields: map[string]string{"msgId": "0A00000100002A9F0000000000001A2B", "queueId": "1", "queueOffset": "17"}},
		{Code: SystemError, Language: "GO", Version: 1, Opaque: 1 << 30, Flag: FlagResponse,
			Remark: `error: "quoted" \ back\slash, tab	newline
and ünïcödé 日本 and control` + "\x00\x01\x1f"},
		{Code: UpdateConsumerOffset, Language: "OTHER", Flag: FlagOneway, Opaque: 0},
		{Code: -1, Language: "NODE_JS", Version: -2, Opaque: -1, Flag: -1,
			ExtFields: map[string]string{"": "empty key", "k": "", "ключ": "значение"}, Body: []byte{0, 1, 2, 0xff}},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, st := range []SerializeType{SerializeJSON, SerializeRocketMQ} {
		for i, c := range roundTripCommands() {
			c.Serialize = st
			got, err := DecodeFrame(encodeFrame(t, c))
			require.NoError(t, err, "%v #%d", st, i)
			require.Equal(t, c, got, "%v #%d", st, i)
		}
	}
}

func TestRoundTripNormalizesEmpty(t *testing.T) {
	for _, st := range []SerializeType{SerializeJSON, SerializeRocketMQ} {
		c := &Command{Code: HeartBeat, Language: "GO", ExtFields: map[string]string{}, Body: []byte{}, Serialize: st}
		got, err := DecodeFrame(encodeFrame(t, c))
		require.NoError(t, err)
		require.Nil(t, got.ExtFields, "%v: empty ext fields decode as nil", st)
		require.Nil(t, got.Body, "%v: empty body decodes as nil", st)
	}
}

func TestDecodeBodyAliasesFrame(t *testing.T) {
	frame := encodeFrame(t, &Command{Code: 1, Body: []byte("abc")})
	c, err := DecodeFrame(frame)
	require.NoError(t, err)
	require.Equal(t, "abc", string(c.Body))
	require.Equal(t, len(c.Body), cap(c.Body), "capacity is clipped so appends cannot clobber the frame")
	frame[len(frame)-1] = 'X'
	require.Equal(t, "abX", string(c.Body))
}

// binaryHeader builds a ROCKETMQ header by hand, independently of the
// encoder.
func binaryHeader(code int16, lang byte, version int16, opaque, flag int32, remark string, ext [][2]string) []byte {
	var h []byte
	h = binary.BigEndian.AppendUint16(h, uint16(code))
	h = append(h, lang)
	h = binary.BigEndian.AppendUint16(h, uint16(version))
	h = binary.BigEndian.AppendUint32(h, uint32(opaque))
	h = binary.BigEndian.AppendUint32(h, uint32(flag))
	h = binary.BigEndian.AppendUint32(h, uint32(len(remark)))
	h = append(h, remark...)
	var e []byte
	for _, kv := range ext {
		e = binary.BigEndian.AppendUint16(e, uint16(len(kv[0])))
		e = append(e, kv[0]...)
		e = binary.BigEndian.AppendUint32(e, uint32(len(kv[1])))
		e = append(e, kv[1]...)
	}
	h = binary.BigEndian.AppendUint32(h, uint32(len(e)))
	return append(h, e...)
}

// frameOf wraps a header and body into a frame without length prefix.
func frameOf(st SerializeType, header, body []byte) []byte {
	f := binary.BigEndian.AppendUint32(nil, uint32(st)<<24|uint32(len(header)))
	f = append(f, header...)
	return append(f, body...)
}

func TestDecodeBinaryHeaderFields(t *testing.T) {
	h := binaryHeader(-300, byte(LanguageJava), 479, -123456, FlagResponse|FlagOneway|0x100, "oops",
		[][2]string{{"queueId", "3"}, {"msgId", "ABC"}, {"empty", ""}})
	c, err := DecodeFrame(frameOf(SerializeRocketMQ, h, []byte("the body")))
	require.NoError(t, err)
	require.Equal(t, &Command{
		Code:      -300,
		Language:  "JAVA",
		Version:   479,
		Opaque:    -123456,
		Flag:      FlagResponse | FlagOneway | 0x100,
		Remark:    "oops",
		ExtFields: map[string]string{"queueId": "3", "msgId": "ABC", "empty": ""},
		Body:      []byte("the body"),
		Serialize: SerializeRocketMQ,
	}, c)
	require.True(t, c.IsResponse())
	require.True(t, c.IsOneway())
}

func TestBinaryLanguageCodes(t *testing.T) {
	for code := 0; code < 256; code++ {
		h := binaryHeader(1, byte(code), 1, 1, 0, "", nil)
		c, err := DecodeFrame(frameOf(SerializeRocketMQ, h, nil))
		require.NoError(t, err)
		name := c.Language
		if code <= 13 && code != int(LanguageOther) {
			require.NotEqual(t, "OTHER", name, "code %d", code)
		} else {
			require.Equal(t, "OTHER", name, "code %d", code)
		}
		require.Equal(t, LanguageCode(code).String(), name)
		if name != "OTHER" {
			require.Equal(t, LanguageCode(code), ParseLanguage(name), "name %s maps back", name)
		}
		// Re-encoding writes the code back (unknown codes as OTHER).
		back := encodeFrame(t, c)
		require.Equal(t, byte(ParseLanguage(name)), back[typeLenSize+binOffLanguage])
	}
	require.Equal(t, LanguageGo, ParseLanguage("GO"))
	require.Equal(t, LanguageOther, ParseLanguage("go"), "names are upper case")
	require.Equal(t, LanguageOther, ParseLanguage("COBOL"))
}

func TestDecodeJavaStyleJSONHeaders(t *testing.T) {
	tests := []struct {
		name   string
		header string
		want   Command
	}{{
		name:   "java response, sorted keys, serializeTypeCurrentRPC",
		header: `{"code":0,"extFields":{"queueId":"1","msgId":"0A00000100002A9F0000000000001A2B","queueOffset":"17","transactionId":"TX"},"flag":1,"language":"JAVA","opaque":42,"serializeTypeCurrentRPC":"JSON","version":479}`,
		want: Command{Language: "JAVA", Version: 479, Opaque: 42, Flag: 1,
			ExtFields: map[string]string{"queueId": "1", "msgId": "0A00000100002A9F0000000000001A2B", "queueOffset": "17", "transactionId": "TX"}},
	}, {
		name:   "whitespace, null remark, no extFields",
		header: " {\n\t\"code\" : 17 , \"remark\" : null , \"language\":\"GO\", \"opaque\" : 3 }\r\n",
		want:   Command{Code: 17, Language: "GO", Opaque: 3},
	}, {
		name:   "null extFields and unknown nested keys",
		header: `{"code":34,"extFields":null,"x":{"a":[1,2.5e3,{"b":null}],"c":true},"y":[],"z":false}`,
		want:   Command{Code: 34},
	}, {
		name:   "escapes",
		header: `{"code":1,"remark":"a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00 \ud800x","extFields":{"k\u0041":"v\u0000"}}`,
		want: Command{Code: 1, Remark: "a\"b\\c/d\b\f\n\r\té😀 \ufffdx",
			ExtFields: map[string]string{"kA": "v\x00"}},
	}, {
		name:   "lenient ext values and null values",
		header: `{"code":1,"extFields":{"n":12,"b":true,"f":false,"z":null,"s":"x"}}`,
		want:   Command{Code: 1, ExtFields: map[string]string{"n": "12", "b": "true", "f": "false", "s": "x"}},
	}, {
		name:   "numeric language, duplicate keys",
		header: `{"code":1,"code":2,"language":9}`,
		want:   Command{Code: 2, Language: "GO"},
	}, {
		name:   "invalid UTF-8 becomes U+FFFD",
		header: "{\"remark\":\"a\xffb\"}",
		want:   Command{Remark: "a\ufffdb"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := DecodeFrame(frameOf(SerializeJSON, []byte(tt.header), nil))
			require.NoError(t, err)
			require.Equal(t, &tt.want, c)
		})
	}
}

func TestDecodeFrameErrors(t *testing.T) {
	okBin := binaryHeader(1, 9, 1, 1, 0, "r", [][2]string{{"k", "v"}})
	tests := []struct {
		name  string
		frame []byte
	}{
		{"empty", nil},
		{"three bytes", []byte{0, 0, 0}},
		{"header length beyond frame", unhex(t, "00000064 7b7d")},
		{"unknown serialize type", frameOf(2, []byte("{}"), nil)},
		{"binary header too short", frameOf(SerializeRocketMQ, okBin[:20], nil)},
		{"binary remark length negative", frameOf(SerializeRocketMQ, patch32(okBin, binOffRemarkLen, -1), nil)},
		{"binary remark length too long", frameOf(SerializeRocketMQ, patch32(okBin, binOffRemarkLen, 100), nil)},
		{"binary ext length too long", frameOf(SerializeRocketMQ, patch32(okBin, binOffRemark+1, 100), nil)},
		{"binary ext length too short", frameOf(SerializeRocketMQ, patch32(okBin, binOffRemark+1, 3), nil)},
		{"binary ext length negative", frameOf(SerializeRocketMQ, patch32(okBin, binOffRemark+1, -8), nil)},
		{"binary trailing header bytes", frameOf(SerializeRocketMQ, append(append([]byte{}, okBin...), 0), nil)},
		{"binary key length negative", frameOf(SerializeRocketMQ, patch16(okBin, binFixedSize+1, -1), nil)},
		{"binary key length too long", frameOf(SerializeRocketMQ, patch16(okBin, binFixedSize+1, 50), nil)},
		{"binary value length too long", frameOf(SerializeRocketMQ, patch32(okBin, binFixedSize+1+2+1, 2), nil)},
		{"binary value length negative", frameOf(SerializeRocketMQ, patch32(okBin, binFixedSize+1+2+1, -1), nil)},
		{"json empty", frameOf(SerializeJSON, nil, nil)},
		{"json not an object", frameOf(SerializeJSON, []byte(`[1]`), nil)},
		{"json null", frameOf(SerializeJSON, []byte(`null`), nil)},
		{"json truncated", frameOf(SerializeJSON, []byte(`{"code":1`), nil)},
		{"json trailing data", frameOf(SerializeJSON, []byte(`{"code":1} x`), nil)},
		{"json two objects", frameOf(SerializeJSON, []byte(`{}{}`), nil)},
		{"json code float", frameOf(SerializeJSON, []byte(`{"code":1.5}`), nil)},
		{"json code string", frameOf(SerializeJSON, []byte(`{"code":"1"}`), nil)},
		{"json code overflow", frameOf(SerializeJSON, []byte(`{"code":2147483648}`), nil)},
		{"json leading zero", frameOf(SerializeJSON, []byte(`{"code":01}`), nil)},
		{"json bare key", frameOf(SerializeJSON, []byte(`{code:1}`), nil)},
		{"json trailing comma", frameOf(SerializeJSON, []byte(`{"code":1,}`), nil)},
		{"json ext nested", frameOf(SerializeJSON, []byte(`{"extFields":{"a":{}}}`), nil)},
		{"json ext array", frameOf(SerializeJSON, []byte(`{"extFields":["a"]}`), nil)},
		{"json remark number", frameOf(SerializeJSON, []byte(`{"remark":5}`), nil)},
		{"json control char in string", frameOf(SerializeJSON, []byte("{\"remark\":\"a\nb\"}"), nil)},
		{"json bad escape", frameOf(SerializeJSON, []byte(`{"remark":"\x"}`), nil)},
		{"json short unicode escape", frameOf(SerializeJSON, []byte(`{"remark":"\u12"}`), nil)},
		{"json unterminated string", frameOf(SerializeJSON, []byte(`{"remark":"abc`), nil)},
		{"json bad literal", frameOf(SerializeJSON, []byte(`{"x":nul}`), nil)},
		{"json too deep", frameOf(SerializeJSON, []byte(`{"x":`+strings.Repeat("[", 100)+strings.Repeat("]", 100)+`}`), nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := DecodeFrame(tt.frame)
			require.ErrorIs(t, err, ErrMalformed)
			require.Nil(t, c)
		})
	}
}

func patch32(b []byte, off int, v int32) []byte {
	b = append([]byte{}, b...)
	binary.BigEndian.PutUint32(b[off:], uint32(v))
	return b
}

func patch16(b []byte, off int, v int16) []byte {
	b = append([]byte{}, b...)
	binary.BigEndian.PutUint16(b[off:], uint16(v))
	return b
}

func TestAppendFrameErrors(t *testing.T) {
	dst := []byte("keep")
	for _, c := range []*Command{
		{Code: 40000, Serialize: SerializeRocketMQ},
		{Code: 1, Version: -40000, Serialize: SerializeRocketMQ},
		{Code: 1, Serialize: 7},
		{Code: 1, ExtFields: map[string]string{strings.Repeat("k", 40000): "v"}, Serialize: SerializeRocketMQ},
	} {
		got, err := AppendFrame(dst, c)
		require.ErrorIs(t, err, ErrMalformed)
		require.Equal(t, "keep", string(got))
	}
	// A header over 16 MiB does not fit the 24-bit length.
	big := &Command{Code: 1, Remark: strings.Repeat("r", maxHeaderLen)}
	for _, st := range []SerializeType{SerializeJSON, SerializeRocketMQ} {
		big.Serialize = st
		_, err := AppendFrame(nil, big)
		require.ErrorIs(t, err, ErrFrameTooLarge)
	}
	// JSON carries codes beyond int16.
	c := &Command{Code: 40000, Serialize: SerializeJSON}
	got, err := DecodeFrame(encodeFrame(t, c))
	require.NoError(t, err)
	require.Equal(t, c, got)
}

func TestReadFrame(t *testing.T) {
	frame, err := AppendFrame(nil, vectorCommand(SerializeRocketMQ))
	require.NoError(t, err)
	two := append(append([]byte{}, frame...), frame...)

	r := bytes.NewReader(two)
	for range 2 {
		b, err := ReadFrame(r, 0)
		require.NoError(t, err)
		require.Equal(t, frame[lenPrefixSize:], b)
	}
	_, err = ReadFrame(r, 0)
	require.ErrorIs(t, err, io.EOF)

	_, err = ReadFrame(bytes.NewReader(frame[:2]), 0)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	_, err = ReadFrame(bytes.NewReader(frame[:10]), 0)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)

	_, err = ReadFrame(bytes.NewReader(frame), len(frame)-lenPrefixSize-1)
	require.ErrorIs(t, err, ErrFrameTooLarge)
	_, err = ReadFrame(bytes.NewReader(frame), len(frame)-lenPrefixSize)
	require.NoError(t, err, "a frame exactly at the limit is accepted")

	_, err = ReadFrame(bytes.NewReader(unhex(t, "7fffffff")), 0)
	require.ErrorIs(t, err, ErrFrameTooLarge)
	for _, prefix := range []string{"00000000", "00000003", "ffffffff", "80000000"} {
		_, err = ReadFrame(bytes.NewReader(unhex(t, prefix+"00000000")), 0)
		require.ErrorIs(t, err, ErrMalformed, prefix)
	}
}

// TestJSONEncoderIsStandard checks the hand-written encoder against
// encoding/json: its output must be valid JSON that decodes to the same
// values.
func TestJSONEncoderIsStandard(t *testing.T) {
	for _, c := range roundTripCommands() {
		c.Serialize = SerializeJSON
		frame := encodeFrame(t, c)
		header := frame[typeLenSize : typeLenSize+int(binary.BigEndian.Uint32(frame)&headerLenMask)]
		require.True(t, json.Valid(header), "%s", header)
		var std struct {
			Code      int32             `json:"code"`
			Language  string            `json:"language"`
			Version   int32             `json:"version"`
			Opaque    int32             `json:"opaque"`
			Flag      int32             `json:"flag"`
			Remark    string            `json:"remark"`
			ExtFields map[string]string `json:"extFields"`
		}
		require.NoError(t, json.Unmarshal(header, &std))
		require.Equal(t, c.Code, std.Code)
		require.Equal(t, c.Language, std.Language)
		require.Equal(t, c.Version, std.Version)
		require.Equal(t, c.Opaque, std.Opaque)
		require.Equal(t, c.Flag, std.Flag)
		require.Equal(t, c.Remark, std.Remark)
		require.Equal(t, len(c.ExtFields), len(std.ExtFields))
		for k, v := range c.ExtFields {
			require.Equal(t, v, std.ExtFields[k])
		}
	}
}

func TestJSONStringInvalidUTF8(t *testing.T) {
	got := appendJSONString(nil, "a\xffb\xe6\x97c\u00e9\ufffd")
	require.Equal(t, "\"a\ufffdb\ufffd\ufffdc\u00e9\ufffd\"", string(got))
	var s string
	require.NoError(t, json.Unmarshal(got, &s))
	require.Equal(t, "a\ufffdb\ufffd\ufffdc\u00e9\ufffd", s)
}

func TestNewRequestResponse(t *testing.T) {
	ext := map[string]string{"topic": "T"}
	req := NewRequest(PullMessage, ext, []byte("b"))
	require.Equal(t, &Command{Code: PullMessage, Language: "GO", Version: 479, ExtFields: ext,
		Body: []byte("b"), Serialize: SerializeJSON}, req)
	require.False(t, req.IsResponse())

	req.Opaque = 99
	req.Serialize = SerializeRocketMQ
	resp := NewResponse(req, PullNotFound, "none")
	require.Equal(t, &Command{Code: PullNotFound, Language: "GO", Version: 479, Opaque: 99,
		Flag: FlagResponse, Remark: "none", Serialize: SerializeRocketMQ}, resp)
	require.True(t, resp.IsResponse())
	require.False(t, resp.IsOneway())

	ns := NewNotSupportedResponse(req)
	require.Equal(t, RequestCodeNotSupported, ns.Code)
	require.Equal(t, " request type 11 not supported", ns.Remark)
}

func TestErrorsAreDistinct(t *testing.T) {
	require.False(t, errors.Is(ErrMalformed, ErrFrameTooLarge))
	require.False(t, errors.Is(ErrConnClosed, ErrTimeout))
}

// TestHeaderEncoder checks that a command whose ext fields come from a
// typed Header (no map) decodes to the same fields as the map encoders
// give, in both header encodings, optional fields set or not.
func TestHeaderEncoder(t *testing.T) {
	req := SendMessageRequestHeader{ProducerGroup: "pg", Topic: "T", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4,
		QueueID: -1, SysFlag: 0, BornTimestamp: 1767225600123, Properties: "UNIQ_KEY\x01AB\x02", ReconsumeTimes: 3, Batch: true}
	minimal := SendMessageRequestHeader{ProducerGroup: "pg", Topic: "T"}
	resp := SendMessageResponseHeader{MsgID: "0A0000010000", QueueID: 2, QueueOffset: -7, TransactionID: "AB", Duplicate: true}
	cases := []struct {
		name string
		enc  HeaderEncoder
		want map[string]string
	}{
		{"send v2", req.V2(), req.EncodeV2()},
		{"send v2 minimal", minimal.V2(), minimal.EncodeV2()},
		{"send response", &resp, resp.Encode()},
		{"send response plain", &SendMessageResponseHeader{MsgID: "x"}, (&SendMessageResponseHeader{MsgID: "x"}).Encode()},
	}
	for _, st := range []SerializeType{SerializeJSON, SerializeRocketMQ} {
		for _, tc := range cases {
			c := &Command{Code: SendMessageV2, Language: "GO", Opaque: 9, Header: tc.enc, Body: []byte("b"), Serialize: st}
			got, err := DecodeFrame(encodeFrame(t, c))
			require.NoError(t, err, "%v %s", st, tc.name)
			require.Equal(t, tc.want, got.ExtFields, "%v %s", st, tc.name)
			require.Equal(t, []byte("b"), got.Body)
			// The same command built with the map encodes to equal fields.
			m := &Command{Code: SendMessageV2, Language: "GO", Opaque: 9, ExtFields: tc.want, Body: []byte("b"), Serialize: st}
			got2, err := DecodeFrame(encodeFrame(t, m))
			require.NoError(t, err)
			require.Equal(t, got2.ExtFields, got.ExtFields)
		}
	}
	h, err := DecodeSendMessageResponseHeader(resp.Encode())
	require.NoError(t, err)
	require.Equal(t, resp, h, "Duplicate round-trips")
}
