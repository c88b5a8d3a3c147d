package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/raftmq/raftmq/protocol/remoting"
)

// Sentinel errors. They are wrapped with context; test them with errors.Is.
var (
	// ErrIndeterminate is wrapped by the error of a write (send, offset
	// commit, topic creation, admin command) whose outcome is unknown: the
	// request was handed to a connection and then timed out, or the
	// connection was lost, or the broker answered SYSTEM_ERROR. The write
	// may or may not have taken effect. A Send that fails with it may be
	// repeated with the same UNIQ_KEY: the broker deduplicates.
	ErrIndeterminate = errors.New("client: outcome indeterminate")
	// ErrClosed is returned by every method once Client.Close was called.
	ErrClosed = errors.New("client: closed")
	// ErrCorrupt is wrapped by the error of a pull whose body does not
	// decode: a record fails its CRC or its length checks, or belongs to
	// another topic or queue than the one pulled. It also wraps
	// message.ErrCorrupt when the record decoder found the problem.
	ErrCorrupt = errors.New("client: corrupt pull response")
	// ErrNoRoute is returned when no node of the group answered a route
	// query.
	ErrNoRoute = errors.New("client: no route")
	// ErrProtocol is wrapped when a broker's answer cannot be understood:
	// a missing or malformed response header, or a batch answer with the
	// wrong number of message ids.
	ErrProtocol = errors.New("client: protocol error")
)

// Error is a broker's answer other than success: the response code, the
// remark, and the address that answered.
type Error struct {
	Code   int32
	Remark string
	Addr   string
}

func (e *Error) Error() string {
	return fmt.Sprintf("client: %s answered %s (%d): %s", e.Addr, codeName(e.Code), e.Code, e.Remark)
}

// Retryable reports whether repeating the request (after a route refresh
// and a backoff) may succeed, as RocketMQ's producers treat send answers:
// SYSTEM_ERROR (1), SYSTEM_BUSY (2), SERVICE_NOT_AVAILABLE (14),
// NO_PERMISSION (16) and TOPIC_NOT_EXIST (17). The producer retries 17 only
// while a fresh route still lists the topic (a node that has not yet
// applied the topic's creation answered); once a route query also answers
// 17, the error is final.
func (e *Error) Retryable() bool {
	switch e.Code {
	case remoting.SystemError, remoting.SystemBusy, remoting.ServiceNotAvailable,
		remoting.NoPermission, remoting.TopicNotExist:
		return true
	}
	return false
}

// Indeterminate reports whether a write answered this way may have taken
// effect. raftmq answers SYSTEM_ERROR when a write was proposed but not
// seen committed in time (remark "indeterminate: ...") and when a follower
// lost the leader while forwarding a write to it; both may have been
// stored. Every SYSTEM_ERROR is therefore treated as indeterminate. All
// other codes are definite: SERVICE_NOT_AVAILABLE means not stored.
func (e *Error) Indeterminate() bool { return e.Code == remoting.SystemError }

// Is makes errors.Is(err, ErrIndeterminate) true for an indeterminate
// answer.
func (e *Error) Is(target error) bool { return target == ErrIndeterminate && e.Indeterminate() }

// LeaderHint returns the leader's client address named in the remark of a
// SERVICE_NOT_AVAILABLE answer ("not the leader; leader is node 2 at
// 10.0.0.2:10911"), if there is one.
func (e *Error) LeaderHint() (string, bool) {
	if e.Code != remoting.ServiceNotAvailable {
		return "", false
	}
	return leaderHint(e.Remark)
}

// leaderHint finds the first host:port token after the word "leader" in a
// remark. It accepts the token only if its port is numeric, so ordinary
// words are never taken for addresses.
func leaderHint(remark string) (string, bool) {
	i := strings.Index(remark, "leader")
	if i < 0 {
		return "", false
	}
	for _, tok := range strings.Fields(remark[i:]) {
		tok = strings.TrimRight(tok, ".,;)")
		tok = strings.TrimLeft(tok, "(")
		host, port, err := net.SplitHostPort(tok)
		if err != nil || host == "" {
			continue
		}
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			continue
		}
		return tok, true
	}
	return "", false
}

// codeName names the response codes a client meets.
func codeName(code int32) string {
	switch code {
	case remoting.Success:
		return "SUCCESS"
	case remoting.SystemError:
		return "SYSTEM_ERROR"
	case remoting.SystemBusy:
		return "SYSTEM_BUSY"
	case remoting.RequestCodeNotSupported:
		return "REQUEST_CODE_NOT_SUPPORTED"
	case remoting.MessageIllegal:
		return "MESSAGE_ILLEGAL"
	case remoting.ServiceNotAvailable:
		return "SERVICE_NOT_AVAILABLE"
	case remoting.NoPermission:
		return "NO_PERMISSION"
	case remoting.TopicNotExist:
		return "TOPIC_NOT_EXIST"
	case remoting.PullNotFound:
		return "PULL_NOT_FOUND"
	case remoting.PullRetryImmediately:
		return "PULL_RETRY_IMMEDIATELY"
	case remoting.PullOffsetMoved:
		return "PULL_OFFSET_MOVED"
	case remoting.QueryNotFound:
		return "QUERY_NOT_FOUND"
	case remoting.InvalidParameter:
		return "INVALID_PARAMETER"
	case remoting.SubscriptionParseFailed:
		return "SUBSCRIPTION_PARSE_FAILED"
	case remoting.SubscriptionGroupNotExist:
		return "SUBSCRIPTION_GROUP_NOT_EXIST"
	case remoting.NoMessage:
		return "NO_MESSAGE"
	case remoting.PollingTimeout:
		return "POLLING_TIMEOUT"
	}
	return "code"
}

// responseError returns the *Error for a non-success response.
func responseError(addr string, resp *remoting.Command) *Error {
	return &Error{Code: resp.Code, Remark: resp.Remark, Addr: addr}
}

// unsent reports whether err, the failure of Conn.Invoke or InvokeAsync,
// means the request was never handed to the connection: it could not be
// encoded (too large, say) or the client is closed. Any other failure
// (timeout, lost connection, a write error) may have come after the
// request reached the broker.
func unsent(err error) bool {
	if errors.Is(err, remoting.ErrConnClosed) || errors.Is(err, remoting.ErrTimeout) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	return errors.Is(err, remoting.ErrFrameTooLarge) || errors.Is(err, remoting.ErrMalformed)
}

// indeterminate wraps err, the failure of a request that may have been
// written, with ErrIndeterminate.
func indeterminate(err error) error {
	if errors.Is(err, ErrIndeterminate) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrIndeterminate, err)
}
