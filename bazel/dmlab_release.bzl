"""The DeepMind Lab release this repository builds (single source of truth for the pin).

Read by WORKSPACE (the `org_deepmind_lab` archive) and by scripts/build_dmlab.sh (which greps the
two string constants below, so keep them on one line each).

release-2020-12-07 is the last tagged upstream release (December 2020); the scalable_agent issue
tracker (#44, #45, #57) recommends building a pinned release rather than HEAD (the release's
Dockerfile cloned HEAD, which stopped building when DeepMind Lab moved its python.BUILD).
No sha256 is pinned here because it could not be computed offline; Bazel prints the archive's
digest on first fetch: paste it into DMLAB_SHA256 to make the fetch hermetic.
"""

DMLAB_REF = "release-2020-12-07"
DMLAB_REPO = "https://github.com/google-deepmind/lab"
DMLAB_URL = DMLAB_REPO + "/archive/refs/tags/" + DMLAB_REF + ".tar.gz"
DMLAB_STRIP_PREFIX = "lab-" + DMLAB_REF
DMLAB_SHA256 = ""
