package remoting

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func txnHeaderCases() []headerCase {
	end := EndTransactionRequestHeader{ProducerGroup: "pg", TranStateTableOffset: 17, CommitLogOffset: 6699,
		CommitOrRollback: TransactionCommitType, FromTransactionCheck: true, MsgID: "U", TransactionID: "TX", Topic: "T"}
	endMin := EndTransactionRequestHeader{ProducerGroup: "pg", CommitOrRollback: TransactionNotType, MsgID: "U"}
	check := CheckTransactionStateRequestHeader{Topic: "T", TranStateTableOffset: 17, CommitLogOffset: 6699,
		MsgID: "U", TransactionID: "TX", OffsetMsgID: "0A00000100002A9F0000000000001A2B"}
	checkMin := CheckTransactionStateRequestHeader{TranStateTableOffset: 0, CommitLogOffset: -1}
	endRequired := []string{"producerGroup", "tranStateTableOffset", "commitLogOffset", "commitOrRollback", "msgId"}
	checkRequired := []string{"tranStateTableOffset", "commitLogOffset"}
	return []headerCase{
		{"EndTransactionRequest", end.Encode, decoder(DecodeEndTransactionRequestHeader), end,
			map[string]string{"producerGroup": "pg", "tranStateTableOffset": "17", "commitLogOffset": "6699",
				"commitOrRollback": "8", "fromTransactionCheck": "true", "msgId": "U", "transactionId": "TX", "topic": "T"},
			endRequired},
		{"EndTransactionRequestMinimal", endMin.Encode, decoder(DecodeEndTransactionRequestHeader), endMin,
			map[string]string{"producerGroup": "pg", "tranStateTableOffset": "0", "commitLogOffset": "0",
				"commitOrRollback": "0", "fromTransactionCheck": "false", "msgId": "U"},
			endRequired},
		{"CheckTransactionStateRequest", check.Encode, decoder(DecodeCheckTransactionStateRequestHeader), check,
			map[string]string{"topic": "T", "tranStateTableOffset": "17", "commitLogOffset": "6699", "msgId": "U",
				"transactionId": "TX", "offsetMsgId": "0A00000100002A9F0000000000001A2B"},
			checkRequired},
		{"CheckTransactionStateRequestMinimal", checkMin.Encode, decoder(DecodeCheckTransactionStateRequestHeader), checkMin,
			map[string]string{"tranStateTableOffset": "0", "commitLogOffset": "-1"},
			checkRequired},
	}
}

// TestTxnHeaders runs the transaction headers through the same checks as
// the other typed headers: exact ext fields, decoding, both frame
// serializations, and an error naming each missing required field.
func TestTxnHeaders(t *testing.T) {
	for _, tc := range txnHeaderCases() {
		t.Run(tc.name, func(t *testing.T) {
			ext := tc.encode()
			require.Equal(t, tc.wantExt, ext)
			got, err := tc.decode(ext)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			for _, st := range []SerializeType{SerializeJSON, SerializeRocketMQ} {
				c, err := DecodeFrame(encodeFrame(t, &Command{Code: EndTransaction, ExtFields: ext, Serialize: st}))
				require.NoError(t, err)
				got, err := tc.decode(c.ExtFields)
				require.NoError(t, err)
				require.Equal(t, tc.want, got)
			}
			for _, field := range tc.required {
				e := copyExt(ext)
				delete(e, field)
				_, err := tc.decode(e)
				require.ErrorIs(t, err, ErrMalformed, "missing %s", field)
				require.ErrorContains(t, err, `"`+field+`"`)
			}
			_, err = tc.decode(nil)
			require.ErrorIs(t, err, ErrMalformed, "nil ext fields")
		})
	}
}

// TestEndTransactionHeaderFromJava decodes fields as a Java producer
// writes them: fromTransactionCheck in another case, unknown fields.
func TestEndTransactionHeaderFromJava(t *testing.T) {
	h, err := DecodeEndTransactionRequestHeader(map[string]string{"producerGroup": "pg", "tranStateTableOffset": "3",
		"commitLogOffset": "+9", "commitOrRollback": "12", "fromTransactionCheck": "TRUE", "msgId": "U", "bname": "b"})
	require.NoError(t, err)
	require.Equal(t, EndTransactionRequestHeader{ProducerGroup: "pg", TranStateTableOffset: 3, CommitLogOffset: 9,
		CommitOrRollback: TransactionRollbackType, FromTransactionCheck: true, MsgID: "U"}, h)
	_, err = DecodeEndTransactionRequestHeader(map[string]string{"producerGroup": "pg", "tranStateTableOffset": "3",
		"commitLogOffset": "x", "commitOrRollback": "8", "msgId": "U"})
	require.ErrorIs(t, err, ErrMalformed)
	require.ErrorContains(t, err, `"commitLogOffset"`)
}
