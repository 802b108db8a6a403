# A Debian package of the install tree (`cpack -G DEB` in the build tree):
# everything `cmake --install` puts down, under /opt/rdmacm, so that no file
# collides with rdma-core's packages (librdmacm1, librdmacm-dev, rdmacm-utils
# keep theirs). Its postinst names /opt/rdmacm's libdir in
# /etc/ld.so.conf.d/0-rdmacm.conf, which ldconfig reads before the multiarch
# directory: every program then loads our librdmacm.so.1 (ldconfig keeps
# libraries of the same soname in the order of their directories, and the
# loader takes the first). Its postrm deletes that file and reruns ldconfig.
# The postinst writes it rather than the package shipping it: a shipped file
# in /etc is a conffile, which dpkg -r leaves behind.
set(RDMACM_DEB_PREFIX /opt/rdmacm)
set(RDMACM_DEB_LIBDIR ${RDMACM_DEB_PREFIX}/${CMAKE_INSTALL_LIBDIR})
set(RDMACM_DEB_LDCONF /etc/ld.so.conf.d/0-rdmacm.conf)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME rdmacm)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "drop-in replacement for rdma-core's librdmacm, used system-wide")
set(CPACK_PACKAGE_CONTACT "rdmacm maintainers")
set(CPACK_PACKAGING_INSTALL_PREFIX ${RDMACM_DEB_PREFIX})
set(CPACK_STRIP_FILES ON)
execute_process(COMMAND dpkg --print-architecture OUTPUT_VARIABLE CPACK_DEBIAN_PACKAGE_ARCHITECTURE
                OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(RDMACM_DEB_FILE ${CMAKE_CURRENT_BINARY_DIR}/package/rdmacm_${PROJECT_VERSION}_${CPACK_DEBIAN_PACKAGE_ARCHITECTURE}.deb)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "librdmacm.so.1 (symbol versions RDMACM_1.0 to 1.5), librspreload, headers,\n\
tools, manual, pkg-config and CMake files, under ${RDMACM_DEB_PREFIX}.\n\
Installing it makes every dynamically linked program load this librdmacm.so.1\n\
instead of rdma-core's (through ${RDMACM_DEB_LDCONF});\n\
removing it gives them rdma-core's again. Check with rdmacm-which(1).")
# Depends from the ELF files (libibverbs1, libc6); our own librdmacm.so.1
# is resolved inside the package, never to rdma-core's librdmacm1.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${RDMACM_DEB_LIBDIR})
configure_file(${CMAKE_CURRENT_LIST_DIR}/deb/postinst.in deb/postinst @ONLY)
configure_file(${CMAKE_CURRENT_LIST_DIR}/deb/postrm.in deb/postrm @ONLY)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${CMAKE_CURRENT_BINARY_DIR}/deb/postinst ${CMAKE_CURRENT_BINARY_DIR}/deb/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_OUTPUT_FILE_PREFIX ${CMAKE_CURRENT_BINARY_DIR}/package)  # build_deb.sh expects it
include(CPack)
