// Catch2 shim: Debian 12 ships Catch2 2.13 (single header); Catch2 v3 splits it up.
#pragma once
#if __has_include(<catch2/catch_all.hpp>)
#include <catch2/catch_all.hpp>
#define KVRANK_CATCH_V3 1
using Catch::Approx;
#else
#include <catch2/catch.hpp>
#endif
