// The misuse table: every call of the API given NULL, dangling and forged
// handles, called in the wrong state, with out-of-range options and lengths.
// Each row runs in a child process of its own (a crash or a hang is a result,
// not the end of the run) against whichever librdmacm is loaded. A row states
// what ours must answer; what rdma-core 44 answers, as measured, is in
// rdma_core_44.expected beside this file ("any" where it is undefined: use
// after free). Where the two differ the row must say why (the README's
// reliability section lists these); the table refuses a difference without
// a reason.
#pragma once

#include <rdma/rdma_cma.h>

#include <functional>
#include <string>
#include <vector>

namespace rdmacm::misuse {

// Live objects a row may ask for, made on demand in the row's own process.
class State {
 public:
  rdma_event_channel* channel();
  rdma_cm_id* fresh(rdma_port_space ps = RDMA_PS_TCP);  // created, nothing else
  rdma_cm_id* bound(rdma_port_space ps = RDMA_PS_TCP);  // bound to the device
  rdma_cm_id* listener();                               // bound and listening
  rdma_cm_id* resolved(rdma_port_space ps = RDMA_PS_TCP);  // addr and route, to listener()
  rdma_cm_id* with_qp();                                // resolved(), with an RC QP
  rdma_cm_id* request();  // the server's id of a connection request (unanswered)
  rdma_cm_id* sync_id();  // created without a channel
  rdma_cm_id* dead_id();  // destroyed: a dangling pointer
  rdma_cm_id* forged_id();  // a zeroed struct the library never made
  rdma_event_channel* dead_channel();
  rdma_event_channel* forged_channel();
  rdma_cm_event* acked_event();   // an event already acknowledged
  rdma_cm_event* forged_event();
  sockaddr* device_addr(uint16_t port = 0);  // IPv4 address of the device
  uint16_t listen_port();                    // network order

 private:
  rdma_cm_event* wait(rdma_event_channel* ch, rdma_cm_event_type type);
  rdma_event_channel* channel_ = nullptr;
  rdma_event_channel* server_ch_ = nullptr;
  rdma_cm_id* listener_ = nullptr;
  sockaddr_storage addr_{};
};

// What a call gave: "0", "-1 EINVAL", "NULL ENOMEM", "void", "void EINVAL"
// (a void call that set errno), "SIGSEGV", "HANG".
using Call = std::function<std::string(State&)>;

struct Row {
  std::string name;
  std::string ours;  // what ours must give
  Call call;
  std::string why = "";  // where ours differs from rdma-core: the reason
};

// Where a row's process reports that its objects could not be made.
extern int setup_report_fd;

// Result formatting for the calls.
std::string ret(int r);                  // 0 or -1 with errno
std::string ptr(const void* p);          // "ptr" or NULL with errno
std::string none();                      // after a void call (errno 0 before)
std::string value(long v);               // a plain value, e.g. a port
void reset_errno();

// The rows, by API family.
void add_channel_rows(std::vector<Row>& rows);
void add_id_rows(std::vector<Row>& rows);
void add_connection_rows(std::vector<Row>& rows);
void add_qp_rows(std::vector<Row>& rows);
void add_other_rows(std::vector<Row>& rows);

}  // namespace rdmacm::misuse
