// fd -> file, for every r* call. Lookups take no lock: a two-level array
// indexed by the fd (pages of 1024 slots allocated on first use and never
// freed), as rdma-core 44's index map. Adding and removing are the file's
// creation and rclose; a lookup racing an rclose of the same fd is the
// application's race, as with close(2).
#pragma once

namespace rdmacm::rsocket {

class File;
class Socket;

File* find_file(int fd);
// The socket behind fd, if it is one (socket_of(find_file(fd))).
Socket* find_socket(int fd);
// false if fd is out of range or memory ran out.
bool insert_file(int fd, File* f);
void remove_file(int fd);

}  // namespace rdmacm::rsocket
