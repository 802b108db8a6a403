# RxeTests.cmake: ctest tests that need an RDMA device.
#
#   include(${PROJECT_SOURCE_DIR}/tests/vm/RxeTests.cmake)
#   rdmacm_add_rxe_test(NAME <name> COMMAND <command> [<arg>...]
#                       [TIMEOUT <seconds>]            # default RDMACM_RXE_TIMEOUT (600)
#                       [LENGTH <seconds>]             # measured length (ctest's COST); default TIMEOUT
#                       [LABELS <label>...]            # "rxe" is always added
#                       [ENVIRONMENT <K=V>...]         # set for the command (inside the VM too)
#                       [WORKING_DIRECTORY <dir>]      # default: the current binary dir
#                       [RW_DIRS <dir>...]             # host dirs the command may write to
#                       [SIW]                          # Soft-iWARP: siw0 instead of rxe0
#                       [WAITS])                       # mostly waits: started first (COST)
#
# Registers ONE ctest test. At test time `rxe-vm auto` decides: if the host has a
# usable RDMA device the command runs natively, otherwise inside one Soft-RoCE VM
# boot (so put a whole GoogleTest binary in one test, not one test per case).
# The test's result is the command's exit status; 124 means the runner's timeout
# expired, 125 that the VM or rxe0 could not be brought up.
# If <command> is an executable target, it is replaced by its file.
# Set RDMACM_VM_FORCE=1 in the environment to use the VM even on RDMA hosts.
#
# All these tests require the fixture test `rxe.vm.prepare` (`rxe-vm prepare
# --unless-native`): it installs the packages and builds the kernel cache once,
# under its own time limit, so that a first run's downloads never eat into a
# test's TIMEOUT. ctest runs it first, also with -R. SIW tests require
# `rxe.vm.prepare_siw` (`rxe-vm prepare --siw --unless-native`) as well: the
# first one builds siw.ko (downloads the kernel's headers and source).

include_guard(GLOBAL)

set(RDMACM_RXE_VM "${CMAKE_CURRENT_LIST_DIR}/rxe-vm" CACHE FILEPATH "The Soft-RoCE VM runner")
set(RDMACM_RXE_TIMEOUT 600 CACHE STRING "Default time limit (seconds) of one rxe test")

function(rdmacm_add_rxe_test)
  cmake_parse_arguments(PARSE_ARGV 0 arg "SIW;WAITS" "NAME;TIMEOUT;LENGTH;WORKING_DIRECTORY"
                        "COMMAND;LABELS;ENVIRONMENT;RW_DIRS")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "rdmacm_add_rxe_test: unknown arguments ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT arg_NAME OR NOT arg_COMMAND)
    message(FATAL_ERROR "rdmacm_add_rxe_test: NAME and COMMAND are required")
  endif()
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT ${RDMACM_RXE_TIMEOUT})
  endif()
  if(NOT arg_LENGTH)
    set(arg_LENGTH ${arg_TIMEOUT})
  endif()
  if(NOT arg_WORKING_DIRECTORY)
    set(arg_WORKING_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}")
  endif()

  list(GET arg_COMMAND 0 exe)
  if(TARGET "${exe}")
    list(REMOVE_AT arg_COMMAND 0)
    list(PREPEND arg_COMMAND "$<TARGET_FILE:${exe}>")
  endif()

  set(runner_args --timeout ${arg_TIMEOUT} --cwd "${arg_WORKING_DIRECTORY}")
  foreach(kv IN LISTS arg_ENVIRONMENT)
    list(APPEND runner_args --env "${kv}")
  endforeach()
  foreach(dir IN LISTS arg_RW_DIRS)
    list(APPEND runner_args --rw "${dir}")
  endforeach()
  set(fixtures rdmacm_rxe_vm)
  if(arg_SIW)
    list(APPEND runner_args --siw)
    list(APPEND fixtures rdmacm_siw_vm)
  endif()

  get_property(have_fixture GLOBAL PROPERTY RDMACM_RXE_FIXTURE)
  if(NOT have_fixture)
    set_property(GLOBAL PROPERTY RDMACM_RXE_FIXTURE ON)
    add_test(NAME rxe.vm.prepare COMMAND "${RDMACM_RXE_VM}" prepare --unless-native)
    set_tests_properties(rxe.vm.prepare PROPERTIES
      TIMEOUT 1800 LABELS rxe FIXTURES_SETUP rdmacm_rxe_vm)
  endif()
  get_property(have_siw_fixture GLOBAL PROPERTY RDMACM_SIW_FIXTURE)
  if(arg_SIW AND NOT have_siw_fixture)
    set_property(GLOBAL PROPERTY RDMACM_SIW_FIXTURE ON)
    add_test(NAME rxe.vm.prepare_siw COMMAND "${RDMACM_RXE_VM}" prepare --siw --unless-native)
    # After rxe.vm.prepare: both take the kernel cache's lock, and this one
    # builds on what that one unpacked.
    set_tests_properties(rxe.vm.prepare_siw PROPERTIES
      TIMEOUT 1800 LABELS rxe FIXTURES_SETUP rdmacm_siw_vm FIXTURES_REQUIRED rdmacm_rxe_vm)
  endif()

  # WAITS: a test whose guest idles much of its time (timeouts it measures,
  # peers it waits for) starts before the others: its idle CPU goes to the
  # sanitizer builds that scripts/test.sh runs beside the VM tests at nice
  # 19, instead of idling at the end of the run, when nothing is left to
  # fill it (measured: RDMACM_VM_PROFILE's "the guest: ... idle").
  set(cost ${arg_LENGTH})
  if(arg_WAITS)
    math(EXPR cost "${arg_LENGTH} + 1000")
  endif()

  add_test(NAME ${arg_NAME}
           COMMAND "${RDMACM_RXE_VM}" auto ${runner_args} -- ${arg_COMMAND}
           WORKING_DIRECTORY "${arg_WORKING_DIRECTORY}")
  # ctest's own limit stays above the runner's, so that the runner can report
  # (console tail, exit 124) before ctest kills it.
  set(labels rxe ${arg_LABELS})
  math(EXPR ctest_timeout "${arg_TIMEOUT} + 60")
  set_tests_properties(${arg_NAME} PROPERTIES
    TIMEOUT ${ctest_timeout}
    LABELS "${labels}"
    FIXTURES_REQUIRED "${fixtures}"
    # One virtual CPU per VM, and ctest counts a VM as one processor: the
    # suite runs two side by side (-j2) on a 2-core host. Two 2-CPU VMs there
    # put four TCG threads on two cores (a guest's spinning CPU waits for its
    # descheduled sibling): measured with rxe.tools and rxe.interop side by
    # side, 258 s with two CPUs each, 183-195 s with one, both passing.
    PROCESSORS 1
    ENVIRONMENT RDMACM_VM_CPUS=1
    # On a first run (no cost data yet) ctest starts the costliest first:
    # each test's LENGTH, measured in a clean-clone run of the suite on a
    # 2-core host (scripts/test.sh's log), so that the two VM slots are packed
    # longest first and no long test ends up running alone at the end.
    COST ${cost})
endfunction()
