// libmosquitto (libmosquitto-dev): MQTT 3.1.1/5, its own network thread.
#include <mosquitto.h>
