/* farm-probe: battery fuel-gauge nodes (with unit and sign hints) and charging-control nodes. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs.h"
#include "sections.h"

#define PSY "/sys/class/power_supply"
#define MAX_CURRENT_SAMPLES 16
/* The kernel ABI says uA; Samsung-style gauges report mA. No phone draws 20 A, and no phone
 * idles below 20 mA, so |x| < 20000 means mA (reference 4.1). */
#define MA_THRESHOLD 20000

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The battery supply: battery/ if present, else the first supply whose type is Battery. */
static int find_battery_dir(char *out, size_t cap) {
    if (fs_is_dir(PSY "/battery")) {
        snprintf(out, cap, PSY "/battery");
        return 1;
    }
    char *names[64];
    int n = fs_list(PSY, "", names, 64);
    int found = 0;
    for (int i = 0; i < n && !found; i++) {
        char p[FS_PATH_MAX], type[64];
        snprintf(p, sizeof(p), PSY "/%s/type", names[i]);
        if (fs_read(p, type, sizeof(type)) == 0 && strcmp(type, "Battery") == 0 &&
            strlen(names[i]) + sizeof(PSY) + 1 < cap) {
            snprintf(out, cap, PSY "/%s", names[i]);
            found = 1;
        }
    }
    fs_free_names(names, n);
    return found;
}

static const char *voltage_unit(long long v) {
    long long a = v < 0 ? -v : v;
    if (a >= 1000000) return "uV";
    if (a >= 1000) return "mV";
    return "V";
}

static void current_node(jsonw *w, const char *dir, const char *status, const probe_opts *o) {
    char path[FS_PATH_MAX], buf[FS_TEXT_MAX];
    snprintf(path, sizeof(path), "%s/current_now", dir);
    int err = jw_node_begin(w, "current_now", path, buf, sizeof(buf));
    long long samples[MAX_CURRENT_SAMPLES];
    int n = 0;
    if (!err) {
        int want = o->current_samples < MAX_CURRENT_SAMPLES ? o->current_samples
                                                            : MAX_CURRENT_SAMPLES;
        for (int i = 0; i < want; i++) {
            if (i) sleep_ms(o->sample_interval_ms);
            if (fs_read_ll(path, &samples[n]) == 0) n++;
        }
    }
    jw_arr_open(w, "samples");
    for (int i = 0; i < n; i++) jw_int(w, NULL, samples[i]);
    jw_arr_close(w);
    /* Judge from the largest magnitude: one reading near zero says nothing about the unit. */
    long long big = 0, sum = 0;
    for (int i = 0; i < n; i++) {
        long long a = samples[i] < 0 ? -samples[i] : samples[i];
        if (a > big) big = a;
        sum += samples[i];
    }
    jw_str(w, "unit_hint", big == 0 ? NULL : (big < MA_THRESHOLD ? "mA" : "uA"));
    const char *sign = NULL;
    if (big != 0 && status) {
        /* "Not charging": cable in but charging stopped (input_suspend, thermal): the battery
         * feeds the phone, so it discharges */
        int discharging = strcmp(status, "Discharging") == 0 || strcmp(status, "Not charging") == 0;
        int charging = strcmp(status, "Charging") == 0;
        if (discharging) sign = sum < 0 ? "negative_discharging" : "positive_discharging";
        /* while charging the ABI convention is positive (into the battery) */
        if (charging) sign = sum > 0 ? "negative_discharging" : "positive_discharging";
    }
    jw_str(w, "sign_hint", sign);
    jw_obj_close(w);
}

void section_battery(jsonw *w, const probe_opts *o) {
    char dir[FS_PATH_MAX / 2], path[FS_PATH_MAX], status[64], buf[FS_TEXT_MAX];
    jw_obj_open(w, "battery");
    if (!find_battery_dir(dir, sizeof(dir))) {
        jw_null(w, "dir");
        jw_obj_close(w);
        return;
    }
    jw_str(w, "dir", dir);
    snprintf(path, sizeof(path), "%s/status", dir);
    int have_status = fs_read(path, status, sizeof(status)) == 0;
    jw_str(w, "status", have_status ? status : NULL);
    current_node(w, dir, have_status ? status : NULL, o);

    snprintf(path, sizeof(path), "%s/voltage_now", dir);
    int err = jw_node_begin(w, "voltage_now", path, buf, sizeof(buf));
    long long v;
    jw_str(w, "unit_hint", !err && fs_read_ll(path, &v) == 0 && v != 0 ? voltage_unit(v) : NULL);
    jw_obj_close(w);

    static const char *plain[] = {"current_avg", "charge_counter", "capacity", "temp"};
    for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, plain[i]);
        jw_node(w, plain[i], path);
    }
    jw_obj_close(w);
}

/* Vendor charging switches (reference 4.2; VR-25/acc acc/ctrl-files.sh list_ch_switches, the
 * database of switches rooted-phone users keep): path, value that enables charging, that
 * disables. Input-suspend switches first (the battery then feeds the phone, which is what farm
 * measures); switches that may leave the battery idle on USB power after them: the run proves
 * the discharge either way (farm.analysis.discharge). Samsung's store_mode is a charge LIMIT
 * (~70 %), not a switch, so it is not here. Keep in step with farm/device/controls.py. */
static const struct {
    const char *path;
    const char *enable;
    const char *disable;
} CHARGING_NODES[] = {
    {PSY "/battery/input_suspend", "0", "1"},
    {"/sys/class/qcom-battery/input_suspend", "0", "1"},
    {"/sys/devices/platform/soc/soc:qcom,pmic_glink/soc:qcom,pmic_glink:qcom,battery_charger/force_charger_suspend", "0", "1"},
    {"/sys/class/battchg_ext/input_suspend", "0", "1"},
    {"/sys/kernel/debug/google_charger/input_suspend", "0", "1"},
    {"/sys/kernel/debug/google_charger/chg_suspend", "0", "1"},
    {PSY "/battery/charging_enabled", "1", "0"},
    {PSY "/battery/battery_charging_enabled", "1", "0"},
    {PSY "/battery/charge_disable", "0", "1"},
    {"/sys/devices/platform/soc/soc:google,charger/charge_disable", "0", "1"},
    {"/sys/class/battchg_ext/charge_disable", "0", "1"},
    {PSY "/battery/charge_enabled", "1", "0"},
    {PSY "/charger/charge_enabled", "1", "0"},
    {PSY "/main/charging_enabled", "1", "0"},
    {PSY "/battery/op_disable_charge", "0", "1"},
    {"/sys/class/oplus_chg/battery/mmi_charging_enable", "1", "0"},
    {"/sys/devices/virtual/oplus_chg/battery/mmi_charging_enable", "1", "0"},
    {"/sys/devices/platform/soc/soc:oplus,chg_intf/oplus_chg/battery/mmi_charging_enable", "1", "0"},
    {"/sys/devices/platform/mt-battery/disable_charger", "0", "1"},
    {PSY "/battery/batt_slate_mode", "0", "1"},
};

void section_charging(jsonw *w) {
    char buf[FS_TEXT_MAX];
    jw_arr_open(w, "charging_control");
    for (size_t i = 0; i < sizeof(CHARGING_NODES) / sizeof(CHARGING_NODES[0]); i++) {
        if (!fs_exists(CHARGING_NODES[i].path)) continue;
        jw_node_begin(w, NULL, CHARGING_NODES[i].path, buf, sizeof(buf));
        /* access(W_OK): never write to find out, that would change the phone's charging */
        jw_bool(w, "writable", fs_writable(CHARGING_NODES[i].path));
        jw_str(w, "enable_value", CHARGING_NODES[i].enable);
        jw_str(w, "disable_value", CHARGING_NODES[i].disable);
        jw_obj_close(w);
    }
    jw_arr_close(w);
}
