/*
 * viewer_assets_none.c — the empty viewer table of a physd built with
 * PHYSD_VIEWER=OFF: http.c then serves its placeholder page at /
 * (viewer_assets.h, docs/viewer.md).
 */
#include "viewer_assets.h"

const ps_viewer_asset ps_viewer_assets[1] = {{NULL, NULL, NULL, 0, NULL, 0, 0}};
const size_t ps_viewer_nassets = 0;
