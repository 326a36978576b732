// A packet-level reference for model/network/flows.py: the topology and flows read from
// stdin, TCP bulk transfers over ns-3's point-to-point links, each flow's goodput printed.
//
// stdin, one item a line:
//   nodes N                 hosts and switches, numbered 0..N-1 (a switch is a router here)
//   link A B RATE_BPS       a full-duplex point-to-point link (RATE each way, 1 us delay)
//   flow SRC DST            a TCP bulk transfer from SRC to DST for the whole run
//   time WARM END           seconds: goodput is counted from WARM to END
// stdout: "flow K BPS" per flow, in the order given.
#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"

#include <iostream>
#include <sstream>
#include <string>
#include <vector>

using namespace ns3;

int
main(int argc, char* argv[])
{
    uint32_t count = 0;
    double warm = 1.0, end = 3.0;
    struct Link { uint32_t a, b; uint64_t rate; };
    std::vector<Link> links;
    std::vector<std::pair<uint32_t, uint32_t>> flows;
    std::string line, word;
    while (std::getline(std::cin, line)) {
        std::istringstream in(line);
        if (!(in >> word)) continue;
        if (word == "nodes") in >> count;
        else if (word == "link") { Link l; in >> l.a >> l.b >> l.rate; links.push_back(l); }
        else if (word == "flow") { uint32_t s, d; in >> s >> d; flows.emplace_back(s, d); }
        else if (word == "time") in >> warm >> end;
    }
    // a datacenter's retransmission timer: ns-3's default minimum (1 s) stalls a flow that
    // loses a packet at a small window (incast) for most of a short run
    Config::SetDefault("ns3::TcpSocketBase::MinRto", TimeValue(MilliSeconds(5)));
    Config::SetDefault("ns3::TcpSocketBase::ClockGranularity", TimeValue(MicroSeconds(100)));
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(1448));
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(1 << 22));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(1 << 22));
    NodeContainer nodes;
    nodes.Create(count);
    InternetStackHelper stack;
    stack.Install(nodes);
    Ipv4AddressHelper address;
    std::vector<Ipv4Address> first(count, Ipv4Address::GetAny());
    for (size_t i = 0; i < links.size(); ++i) {
        PointToPointHelper p2p;
        p2p.SetDeviceAttribute("DataRate", DataRateValue(DataRate(links[i].rate)));
        p2p.SetChannelAttribute("Delay", StringValue("1us"));
        p2p.SetQueue("ns3::DropTailQueue", "MaxSize", StringValue("200p"));
        NetDeviceContainer devices = p2p.Install(nodes.Get(links[i].a), nodes.Get(links[i].b));
        std::ostringstream net;
        net << "10." << (i / 250) << "." << (i % 250) << ".0";
        address.SetBase(net.str().c_str(), "255.255.255.0");
        Ipv4InterfaceContainer ifs = address.Assign(devices);
        if (first[links[i].a] == Ipv4Address::GetAny()) first[links[i].a] = ifs.GetAddress(0);
        if (first[links[i].b] == Ipv4Address::GetAny()) first[links[i].b] = ifs.GetAddress(1);
    }
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();
    std::vector<Ptr<PacketSink>> sinks;
    for (size_t k = 0; k < flows.size(); ++k) {
        uint16_t port = 5000 + k;
        PacketSinkHelper sink("ns3::TcpSocketFactory", InetSocketAddress(Ipv4Address::GetAny(), port));
        ApplicationContainer s = sink.Install(nodes.Get(flows[k].second));
        s.Start(Seconds(0.0));
        sinks.push_back(DynamicCast<PacketSink>(s.Get(0)));
        BulkSendHelper send("ns3::TcpSocketFactory", InetSocketAddress(first[flows[k].second], port));
        send.SetAttribute("MaxBytes", UintegerValue(0));
        ApplicationContainer a = send.Install(nodes.Get(flows[k].first));
        a.Start(Seconds(0.01 * (k % 7)));
    }
    std::vector<uint64_t> at_warm(flows.size(), 0);
    Simulator::Schedule(Seconds(warm), [&]() {
        for (size_t k = 0; k < sinks.size(); ++k) at_warm[k] = sinks[k]->GetTotalRx();
    });
    Simulator::Stop(Seconds(end));
    Simulator::Run();
    for (size_t k = 0; k < sinks.size(); ++k) {
        double bps = 8.0 * (sinks[k]->GetTotalRx() - at_warm[k]) / (end - warm);
        std::cout << "flow " << k << " " << bps << "\n";
    }
    Simulator::Destroy();
    return 0;
}
