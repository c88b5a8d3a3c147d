package namesrv

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"

	"github.com/raftmq/raftmq/protocol/remoting"
)

// The calls RocketMQ's admin tools (mqadmin, the dashboard) make to a name
// server besides routes: topic lists, topic deletion and registration,
// broker write permission, the key-value store and the settings.

// handleTopicList answers the topic-list requests with a TopicList:
//   - GET_ALL_TOPIC_LIST_FROM_NAMESERVER: every topic with a route;
//   - GET_TOPICS_BY_CLUSTER: the topics a broker name of a cluster serves;
//   - GET_SYSTEM_TOPIC_LIST_FROM_NS: the cluster and broker names (every
//     RocketMQ broker has a topic of each) and some broker's address;
//   - GET_UNIT_TOPIC_LIST, GET_HAS_UNIT_SUB_TOPIC_LIST,
//     GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: topics by their unit flags.
func (s *Server) handleTopicList(conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	var tl remoting.TopicList
	switch req.Code {
	case remoting.GetAllTopicListFromNameServer:
		tl.TopicList = s.Topics("")
	case remoting.GetTopicsByCluster:
		h, err := remoting.DecodeGetTopicsByClusterRequestHeader(req.ExtFields)
		if err != nil {
			return s.refuse(conn, req, remoting.InvalidParameter, err.Error())
		}
		tl.TopicList = s.Topics(h.Cluster)
	case remoting.GetSystemTopicListFromNS:
		tl = s.systemTopics()
	default:
		want := func(flag int32) bool {
			unit, sub := flag&remoting.TopicSysFlagUnit != 0, flag&remoting.TopicSysFlagUnitSub != 0
			switch req.Code {
			case remoting.GetUnitTopicList:
				return unit
			case remoting.GetHasUnitSubTopicList:
				return sub
			}
			return sub && !unit
		}
		s.mu.Lock()
		tl.TopicList = s.mu.t.topicList(func(qs map[string]queueConfig) bool {
			// RocketMQ looks at one broker name's flags; take the first
			// by name, so the answer does not vary.
			return want(qs[slices.Min(slices.Collect(maps.Keys(qs)))].sysFlag)
		})
		s.mu.Unlock()
	}
	return jsonResponse(req, tl)
}

// systemTopics lists the cluster and broker names, and the address of the
// first broker name's lowest id.
func (s *Server) systemTopics() remoting.TopicList {
	s.mu.Lock()
	defer s.mu.Unlock()
	tl := remoting.TopicList{TopicList: []string{}}
	ci := s.mu.t.clusterInfo()
	for _, c := range slices.Sorted(maps.Keys(ci.ClusterAddrTable)) {
		tl.TopicList = append(tl.TopicList, c)
		tl.TopicList = append(tl.TopicList, ci.ClusterAddrTable[c]...)
	}
	for _, n := range slices.Sorted(maps.Keys(ci.BrokerAddrTable)) {
		addrs := ci.BrokerAddrTable[n].BrokerAddrs
		tl.BrokerAddr = addrs[slices.Min(slices.Collect(maps.Keys(addrs)))]
		break
	}
	return tl
}

func (s *Server) handleDeleteTopic(conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeDeleteTopicInNamesrvRequestHeader(req.ExtFields)
	if err != nil {
		return s.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	s.mu.Lock()
	s.mu.t.deleteTopic(h.Topic, h.ClusterName)
	s.mu.Unlock()
	s.log.Info("namesrv: topic deleted", "topic", h.Topic, "cluster", h.ClusterName)
	return remoting.NewResponse(req, remoting.Success, "")
}

// handleRegisterTopic adds the queue datas of the body (a TopicRouteData)
// to a topic's route. As in RocketMQ, it answers SUCCESS even when it
// ignores them because one names an unregistered broker name; that is
// logged.
func (s *Server) handleRegisterTopic(conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeRegisterTopicRequestHeader(req.ExtFields)
	if err != nil {
		return s.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	rd, err := remoting.DecodeTopicRouteData(req.Body)
	if err != nil {
		return s.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	s.mu.Lock()
	unknown := s.mu.t.registerTopic(h.Topic, rd.QueueDatas)
	s.mu.Unlock()
	if unknown != "" {
		s.log.Warn("namesrv: topic registration ignored: unregistered broker name", "topic", h.Topic, "broker", unknown)
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

// handleWritePerm clears (205) or restores (327) the write permission of a
// broker name's queues of every topic, answering how many topics changed.
func (s *Server) handleWritePerm(conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeBrokerNameRequestHeader(req.ExtFields)
	if err != nil {
		return s.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	wipe := req.Code == remoting.WipeWritePermOfBroker
	s.mu.Lock()
	n := s.mu.t.setWritePerm(h.BrokerName, wipe)
	s.mu.Unlock()
	s.log.Info("namesrv: broker write permission changed", "broker", h.BrokerName, "wipe", wipe, "topics", n)
	resp := remoting.NewResponse(req, remoting.Success, "")
	rh := remoting.WritePermResponseHeader{TopicCount: int32(n)}
	resp.ExtFields = rh.Encode(req.Code)
	return resp
}

// handleKV serves the key-value store (kept in memory: unlike RocketMQ's
// kvConfig.json it does not survive a restart). GET_KV_CONFIG and
// GET_KVLIST_BY_NAMESPACE answer QUERY_NOT_FOUND for what is not there.
func (s *Server) handleKV(conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeKVConfigRequestHeader(req.Code, req.ExtFields)
	if err != nil {
		return s.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	kv := s.mu.t.kv
	switch req.Code {
	case remoting.PutKVConfig:
		if kv[h.Namespace] == nil {
			kv[h.Namespace] = map[string]string{}
		}
		kv[h.Namespace][h.Key] = h.Value
	case remoting.DeleteKVConfig:
		delete(kv[h.Namespace], h.Key)
		if len(kv[h.Namespace]) == 0 {
			delete(kv, h.Namespace)
		}
	case remoting.GetKVConfig:
		v, ok := kv[h.Namespace][h.Key]
		if !ok {
			return remoting.NewResponse(req, remoting.QueryNotFound, "No config item, Namespace: "+h.Namespace+" Key: "+h.Key)
		}
		resp := remoting.NewResponse(req, remoting.Success, "")
		rh := remoting.GetKVConfigResponseHeader{Value: v}
		resp.ExtFields = rh.Encode()
		return resp
	case remoting.GetKVListByNamespace:
		if len(kv[h.Namespace]) == 0 {
			return remoting.NewResponse(req, remoting.QueryNotFound, "No config item, Namespace: "+h.Namespace)
		}
		return jsonResponse(req, remoting.KVTable{Table: maps.Clone(kv[h.Namespace])})
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

// handleGetConfig answers GET_NAMESRV_CONFIG with the settings as Java
// properties text, under RocketMQ's names where RocketMQ has the setting.
func (s *Server) handleGetConfig(req *remoting.Command) *remoting.Command {
	s.mu.Lock()
	scan, listen := s.mu.scan, s.mu.listen
	s.mu.Unlock()
	var b strings.Builder
	if _, port, err := net.SplitHostPort(listen); err == nil {
		fmt.Fprintf(&b, "listenPort=%s\n", port)
	}
	fmt.Fprintf(&b, "brokerExpireMillis=%d\n", s.expiry.Milliseconds())
	fmt.Fprintf(&b, "scanNotActiveBrokerInterval=%d\n", scan.Milliseconds())
	b.WriteString("enableAllTopicList=true\nenableTopicList=true\norderMessageEnable=false\n")
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = []byte(b.String())
	return resp
}
