/*
 * adm_test.c - the memory budget's admission pacing (adm_pace_ns): zero up
 * to half the admission limit, then in proportion to how far past half the
 * budget is, counting only what the sealer holds, ADM_PACE_MAX_NS at the
 * limit and beyond.
 */
#include <criterion/criterion.h>

#include "storage/adm.h"

#define MS 1000000ull

static void setup(uint64_t budget, uint64_t reserve, uint64_t in_use, uint64_t sealing)
{
    adm_init(budget);
    adm_set_reserve(reserve);
    adm_charge(in_use);
    adm_sealing_add((int64_t)sealing);
}

Test(adm, no_pacing_up_to_half_the_admission_limit)
{
    setup(1000, 0, 500, 500);
    cr_expect_eq(adm_pace_ns(), 0);
    setup(1000, 200, 400, 400); /* limit 800: half is 400 */
    cr_expect_eq(adm_pace_ns(), 0);
}

Test(adm, pacing_grows_with_the_square_of_the_way_past_half)
{
    setup(1000, 0, 750, 1000); /* half way: 40 ms / 4 */
    cr_expect_eq(adm_pace_ns(), 10 * MS);
    setup(1000, 0, 600, 1000); /* a fifth: 40 ms / 25 */
    cr_expect_eq(adm_pace_ns(), 1600000);
    setup(1000, 200, 600, 1000); /* limit 800, half 400: 200 / 400 past it */
    cr_expect_eq(adm_pace_ns(), 10 * MS);
}

Test(adm, only_memory_the_sealer_holds_paces)
{
    setup(1000, 0, 900, 0); /* full of other charges (tables, caches): no lag to pace */
    cr_expect_eq(adm_pace_ns(), 0);
    setup(1000, 0, 900, 100); /* 400 past half, but the sealer holds only 100 */
    cr_expect_eq(adm_pace_ns(), 1600000);
    adm_sealing_add(-100); /* sealed and freed */
    cr_expect_eq(adm_sealing(), 0);
    cr_expect_eq(adm_pace_ns(), 0);
}

Test(adm, a_caches_charges_count_in_use_but_do_not_pace)
{
    setup(1000, 0, 600, 1000); /* a fifth past half: 40 ms / 25 */
    cr_expect_eq(adm_pace_ns(), 1600000);
    adm_cached_add(150); /* the open blocks' chunk cache */
    cr_expect_eq(adm_in_use(), 750);
    cr_expect_eq(adm_cached(), 150);
    cr_expect_eq(adm_pace_ns(), 1600000, "as before the cache took them");
    cr_expect(!adm_try_charge(251), "admission counts them");
    cr_expect(adm_try_charge(250));
    adm_uncharge(250);
    adm_charge(150); /* the same bytes as an ordinary charge: half way */
    cr_expect_eq(adm_pace_ns(), 10 * MS);
    adm_uncharge(150);
    adm_cached_add(-150);
    cr_expect_eq(adm_in_use(), 600);
    cr_expect_eq(adm_cached(), 0);
    cr_expect_eq(adm_pace_ns(), 1600000);
}

Test(adm, refusals_count_the_charges_that_found_no_room)
{
    setup(1000, 0, 600, 0);
    cr_expect_eq(adm_refusals(), 0);
    cr_expect(adm_try_charge(400));
    cr_expect_eq(adm_refusals(), 0);
    cr_expect(!adm_try_charge(1));
    cr_expect(!adm_try_charge(500));
    cr_expect_eq(adm_refusals(), 2);
    cr_expect_eq(adm_room(), 0);
    adm_init(1000);
    cr_expect_eq(adm_refusals(), 0);
}

Test(adm, the_most_at_the_limit_and_past_it)
{
    setup(1000, 0, 1000, 1000);
    cr_expect_eq(adm_pace_ns(), ADM_PACE_MAX_NS);
    setup(1000, 0, 1300, 1300); /* committed charges may overdraw the budget */
    cr_expect_eq(adm_pace_ns(), ADM_PACE_MAX_NS);
    cr_expect_eq(ADM_PACE_MAX_NS, 40 * MS);
}

/* ---- the budget against the whole process (adm_set_uncounted) ---- */

Test(adm, uncounted_memory_comes_out_of_admission_on_top_of_the_reserve)
{
    setup(1600, 200, 0, 0); /* limit 1400 */
    adm_set_uncounted(200); /* the limit is 1200 */
    cr_expect_not(adm_try_charge(1201));
    cr_expect(adm_try_charge(1200));
    cr_expect_eq(adm_excess(), 0);
    adm_set_uncounted(300); /* measured again, larger: 100 over */
    cr_expect_eq(adm_excess(), 100);
    cr_expect_not(adm_try_charge(1));
    adm_uncharge(100);
    cr_expect_eq(adm_excess(), 0);
    cr_expect(adm_fits(0, 1400));
    cr_expect_not(adm_fits(1, 1400), "1100 charged + 300 uncounted + 1");
}

Test(adm, a_querys_demand_is_kept_free_while_it_waits)
{
    setup(1000, 0, 0, 0);
    adm_demand_add(300);
    cr_expect_not(adm_try_charge(701));
    cr_expect(adm_try_charge(700));
    cr_expect_eq(adm_excess(), 0, "the demand is not an excess");
    adm_demand_add(-300);
    cr_expect(adm_try_charge(300));
}
