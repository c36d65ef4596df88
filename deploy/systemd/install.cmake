# install.cmake — installs the systemd unit and the config file (run by
# `cmake --install`, from the install(SCRIPT) rule of CMakeLists.txt), with
# the paths of this install written into the unit: the physd binary under
# the prefix, the config file in /etc when the prefix is /usr, else in
# PREFIX/etc. PHYSD_SOURCE_DIR and PHYSD_BINDIR are set by the rule.
set(prefix "${CMAKE_INSTALL_PREFIX}")
if(prefix STREQUAL "/usr")
  set(etc "/etc")
else()
  set(etc "${prefix}/etc")
endif()
file(READ "${PHYSD_SOURCE_DIR}/deploy/systemd/physd.service" unit)
string(REPLACE "/usr/bin/physd" "${prefix}/${PHYSD_BINDIR}/physd" unit "${unit}")
string(REPLACE "/etc/physd/" "${etc}/physd/" unit "${unit}")
set(unit_dir "$ENV{DESTDIR}${prefix}/lib/systemd/system")
message(STATUS "Installing: ${unit_dir}/physd.service")
file(MAKE_DIRECTORY "${unit_dir}")
file(WRITE "${unit_dir}/physd.service" "${unit}")
# The config file is the administrator's once installed: never overwritten.
set(conf "$ENV{DESTDIR}${etc}/physd/physd.conf")
if(EXISTS "${conf}")
  message(STATUS "Up-to-date (kept): ${conf}")
else()
  message(STATUS "Installing: ${conf}")
  file(MAKE_DIRECTORY "$ENV{DESTDIR}${etc}/physd")
  file(COPY "${PHYSD_SOURCE_DIR}/deploy/systemd/physd.conf" DESTINATION "$ENV{DESTDIR}${etc}/physd")
endif()
