package remoting

import "testing"

func TestRefusalsOncePerHostCodeAndAnswer(t *testing.T) {
	var r Refusals
	req := NewRequest(SendMessage, nil, nil)
	if _, first := r.First(nil, req, MessageIllegal); !first {
		t.Fatal("first refusal not reported")
	}
	if _, first := r.First(nil, req, MessageIllegal); first {
		t.Fatal("second identical refusal reported again")
	}
	if _, first := r.First(nil, req, TopicNotExist); !first {
		t.Fatal("another answer to the same code not reported")
	}
	if _, first := r.First(nil, NewRequest(PullMessage, nil, nil), MessageIllegal); !first {
		t.Fatal("another code not reported")
	}
}
